// The world the bad-input cases run in: a real quantd (one local worker) on
// loopback with a fresh data folder, a temporary folder that is its only
// allowed root, a good checkpoint and calibration set inside it, and the
// client calls the cases and their checks make (gRPC stubs, quantctl).
#ifndef QUANT_BENCH_RELIABILITY_BAD_INPUT_ENV_H_
#define QUANT_BENCH_RELIABILITY_BAD_INPUT_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/load/quantd_process.h"
#include "grpcpp/channel.h"
#include "quant/v1/service.grpc.pb.h"

namespace quant::reliability {

struct EnvOptions {
  std::string quantd_path;
  std::string quantctl_path;
  std::string shared_dir;  // Holds models/stories260K and data/.
  int max_upload_mb = 1;
  absl::Duration job_timeout = absl::Minutes(5);
  bool keep_temp = false;
};

// A finished quantctl run.
struct ProgramResult {
  int exit_code = -1;  // -1: did not exit normally.
  std::string out;
  std::string err;
};

class BadInputEnv {
 public:
  // Makes the temporary folder and the good inputs, then starts quantd.
  static absl::StatusOr<std::unique_ptr<BadInputEnv>> Start(
      const EnvOptions& options);
  // Stops quantd if Stop was not called; removes the temporary folder
  // unless keep_temp.
  ~BadInputEnv();

  BadInputEnv(const BadInputEnv&) = delete;
  BadInputEnv& operator=(const BadInputEnv&) = delete;

  // SIGTERM to quantd: OK when it exits 0.
  absl::Status Stop();
  // Keeps the temporary folder (quantd.log, the inputs) after the run.
  void KeepTemp() { options_.keep_temp = true; }

  const std::string& temp_dir() const { return temp_; }
  const std::string& shared_dir() const { return shared_; }
  // The shared stories260K hf-f32 folder (outside the allowed roots).
  std::string SharedCheckpoint() const;
  // A copy of it under the allowed root, and where bad copies go.
  const std::string& good_checkpoint() const { return good_checkpoint_; }
  std::string ModelsDir() const;
  // A small plain-text calibration set, already uploaded.
  const std::string& good_calibration_text() const { return good_text_; }
  const std::string& good_calibration_sha256() const { return good_sha_; }
  const std::string& address() const { return quantd_->address(); }
  // Whether a calibration set with this hash was stored (the artifact
  // store's copy of an upload).
  bool CalibrationStored(const std::string& sha256) const;
  // Whether the packed checkpoint of `job_id` exists in the artifact store.
  bool CheckpointPublished(const std::string& job_id) const;

  // A request that CreateJob accepts: the good checkpoint and calibration
  // set, and a small RTN recipe.
  v1::CreateJobRequest GoodRequest() const;

  grpc::Status CreateJob(const v1::CreateJobRequest& request, v1::Job* job);
  grpc::Status Upload(const std::string& filename, const std::string& bytes,
                      v1::UploadCalibrationResponse* response);
  absl::StatusOr<v1::Job> GetJob(const std::string& id);
  absl::StatusOr<v1::JobReport> GetJobReport(const std::string& id);
  // Every job, over all ListJobs pages.
  absl::StatusOr<int> CountJobs();
  // Polls GetJob until the job is SUCCEEDED, FAILED or CANCELLED.
  absl::StatusOr<v1::Job> WaitForJob(const std::string& id);
  // Health SERVING (server and QuantService), ListJobs OK, and GetJob OK for
  // a job known to exist (or NOT_FOUND for an unknown id before any job).
  absl::Status StillServing();
  // Remembers a job that exists, for StillServing's GetJob.
  void NoteJob(const std::string& id) { known_job_ = id; }

  // Runs quantctl with `args` and --addr of this quantd.
  absl::StatusOr<ProgramResult> RunQuantctl(std::vector<std::string> args);

 private:
  BadInputEnv() = default;
  absl::Status PrepareInputs();

  EnvOptions options_;
  std::string temp_;
  std::string shared_;
  std::string good_checkpoint_;
  std::string good_text_;
  std::string good_sha_;
  std::string known_job_;
  std::unique_ptr<load::QuantdProcess> quantd_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::QuantService::Stub> stub_;
};

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_BAD_INPUT_ENV_H_
