// One quantd under test with its workers, for the service tests that drive
// real processes: start, kill and restart quantd on a data directory, start
// quant-worker processes, create and follow jobs over gRPC, read the task
// table quantd left in SQLite, and the in-process reference checkpoint the
// service's output must equal byte for byte.
#ifndef QUANT_TESTS_SERVICE_SERVICE_FIXTURE_H_
#define QUANT_TESTS_SERVICE_SERVICE_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "quant/v1/service.grpc.pb.h"
#include "server/store/job_store.h"
#include "tests/service/child_process.h"

namespace quant::testing {

// The small service recipe (tests/fixtures/service): quick under ASan.
std::string SmallRecipePath();

// What every service test quantizes: stories260K's checkpoint folder and the
// calibration text, symlinks resolved (as quantd's URI policy sees them).
std::string CheckpointDir();
std::string CalibrationPath();

// The undisturbed result for `recipe_path`: model.safetensors of an
// in-process local run on stories260K, computed once per test binary.
struct Reference {
  std::string tensors;  // model.safetensors, the bytes
  double seconds = 0;   // how long the local run took (a job's time scale)
};
absl::StatusOr<Reference> ReferenceRun(const std::string& recipe_path);

// `result`'s value, or T{} with its error recorded as a test failure: for
// checks that go on after a failed call.
template <typename T>
T ValueOrFailure(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : T{};
}

class ServiceHarness {
 public:
  // Everything (data dir, artifacts, logs) goes under `dir`.
  explicit ServiceHarness(std::string dir);
  ~ServiceHarness();

  const std::string& dir() const { return dir_; }
  const std::string& address() const { return address_; }
  ChildProcess* quantd() { return quantd_.get(); }
  // What quantd printed on stdout that the harness read: its "listening
  // on" lines, and the rest once stopped or killed.
  const std::string& quantd_stdout() const { return quantd_stdout_; }

  // Sent as "authorization: Bearer TOKEN" on every call from now on (for a
  // quantd started with --client_token_file).
  void set_client_token(std::string token) { client_token_ = std::move(token); }

  // quantd's flags for `listen` on this harness's directories.
  std::vector<std::string> QuantdArgs(const std::string& listen) const;
  // Starts quantd (stderr, with its local workers', to dir/quantd.log),
  // waits for its "listening on" line and connects.
  absl::Status StartQuantd(std::vector<std::string> args,
                           std::vector<std::string> extra_env = {});
  // SIGKILL, no chance to clean up.
  void KillQuantd();
  // SIGTERM; fails unless it exits 0.
  absl::Status StopQuantd();

  // A quant-worker named `name` logging to dir/NAME.log.
  std::unique_ptr<ChildProcess> StartWorker(
      const std::string& name, std::vector<std::string> extra_args = {});
  // The same, run through `wrapper` (e.g. {"/usr/bin/prlimit", "--fsize=N",
  // "--"}).
  std::unique_ptr<ChildProcess> StartWrappedWorker(
      std::vector<std::string> wrapper, const std::string& name,
      std::vector<std::string> extra_args = {});

  // The text of dir/NAME ("" when absent).
  std::string Log(const std::string& name) const;
  // Waits until dir/NAME contains `text`.
  absl::Status WaitForLog(const std::string& name, const std::string& text,
                          int timeout_s) const;

  absl::StatusOr<v1::CreateJobRequest> Request(
      const std::string& request_id, const std::string& recipe_path) const;
  absl::StatusOr<v1::Job> Create(const std::string& request_id,
                                 const std::string& recipe_path);
  // A job for `recipe` on stories260K, without request id or labels.
  absl::StatusOr<v1::CreateJobRequest> RecipeRequest(
      const Recipe& recipe) const;
  // Sends `request` as it is.
  absl::StatusOr<v1::Job> CreateJob(const v1::CreateJobRequest& request);
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // Polls until the job is SUCCEEDED, FAILED or CANCELLED.
  absl::StatusOr<v1::Job> WaitForEnd(const std::string& id, int timeout_s);
  // Polls until `done(job)` (when given) or the job ends. Unlike WaitForEnd
  // a failed GetJob ends the wait: quantd is meant to be up throughout.
  absl::StatusOr<v1::Job> WaitFor(
      const std::string& id, const std::function<bool(const v1::Job&)>& done,
      int timeout_s);
  // Every event WatchJob sends until the job ends.
  absl::StatusOr<std::vector<v1::JobEvent>> WatchToEnd(const std::string& id);
  absl::StatusOr<v1::JobReport> Report(const std::string& id);
  // GetJobReport with html: the report page of a finished job.
  absl::StatusOr<std::string> ReportHtml(const std::string& id);
  absl::StatusOr<v1::Job> Cancel(const std::string& id);
  // Every job, all pages.
  absl::StatusOr<std::vector<v1::Job>> ListAll();

  // The job's tasks as the store holds them; quantd must not be running.
  absl::StatusOr<std::vector<store::Task>> StoredTasks(const std::string& id);
  // The same over a second connection to quantd's database, which the store
  // allows while quantd runs.
  absl::StatusOr<std::vector<store::Task>> ReadStoredTasks(
      const std::string& id) const;
  // model.safetensors of the job's packed checkpoint.
  absl::StatusOr<std::string> JobTensors(const std::string& id) const;
  // File `name` of the job's published checkpoint.
  absl::StatusOr<std::string> JobFile(const std::string& id,
                                      const std::string& name) const;

 private:
  // Polls GetJob until `done` or the job ends; `strict`: a failed GetJob
  // ends the wait.
  void Authorize(grpc::ClientContext* context) const;
  absl::StatusOr<v1::Job> Poll(const std::string& id,
                               const std::function<bool(const v1::Job&)>& done,
                               int timeout_s, bool strict);

  std::string dir_;
  std::unique_ptr<ChildProcess> quantd_;
  std::string quantd_stdout_;
  std::string address_;
  std::string client_token_;
  std::unique_ptr<v1::QuantService::Stub> stub_;
};

}  // namespace quant::testing

#endif  // QUANT_TESTS_SERVICE_SERVICE_FIXTURE_H_
