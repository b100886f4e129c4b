// CreateWith and UploadThenCreate.
#include "bench/reliability/case_actions.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/sha256.h"

namespace quant::reliability {

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

Observation SetupFailed(const absl::Status& status) {
  Observation observed;
  observed.status = "setup failed";
  observed.message = std::string(status.message());
  observed.problems.push_back(
      absl::StrCat("could not build the input: ", status.ToString()));
  return observed;
}

BadInputCase CreateCase(std::string name, std::string input, Expectation expect,
                        RequestEdit edit) {
  BadInputCase c;
  c.name = std::move(name);
  c.input = std::move(input);
  c.expect = std::move(expect);
  c.act = [edit = std::move(edit)](BadInputEnv& env) {
    return CreateWith(env, edit);
  };
  return c;
}

Observation CreateWith(BadInputEnv& env, const RequestEdit& edit) {
  v1::CreateJobRequest request = env.GoodRequest();
  if (edit) {
    if (absl::Status s = edit(env, request); !s.ok()) return SetupFailed(s);
  }
  v1::Job job;
  const grpc::Status status = env.CreateJob(request, &job);
  Observation observed;
  if (!status.ok()) {
    observed.stage = Stage::kCreateJob;
    observed.status = CodeName(status.error_code());
    observed.message = status.error_message();
    return observed;
  }
  observed.stage = Stage::kJob;
  observed.job_id = job.id();
  return observed;
}

Observation UploadThenCreate(BadInputEnv& env, const std::string& filename,
                             const std::string& bytes,
                             const RequestEdit& edit) {
  v1::UploadCalibrationResponse uploaded;
  const grpc::Status status = env.Upload(filename, bytes, &uploaded);
  if (!status.ok()) {
    Observation observed;
    observed.stage = Stage::kUploadCalibration;
    observed.status = CodeName(status.error_code());
    observed.message = status.error_message();
    observed.unstored_sha256 = Sha256Hex(bytes);
    return observed;
  }
  const std::string sha256 = uploaded.sha256();
  return CreateWith(
      env, [&](BadInputEnv& e, v1::CreateJobRequest& request) -> absl::Status {
        request.mutable_calibration()->set_sha256(sha256);
        return edit ? edit(e, request) : absl::OkStatus();
      });
}

}  // namespace quant::reliability
