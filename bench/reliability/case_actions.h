// The actions the bad-input cases share: send a CreateJob request, or upload
// a calibration file and (when it is accepted) create a job with it, and
// record what came back as an Observation.
#ifndef QUANT_BENCH_RELIABILITY_CASE_ACTIONS_H_
#define QUANT_BENCH_RELIABILITY_CASE_ACTIONS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "bench/reliability/bad_input_case.h"
#include "bench/reliability/bad_input_env.h"
#include "grpcpp/support/status.h"
#include "quant/v1/service.pb.h"

namespace quant::reliability {

// "INVALID_ARGUMENT", ... (the canonical names, shared by gRPC and absl).
std::string CodeName(grpc::StatusCode code);

// An observation for a case whose input could not even be built.
Observation SetupFailed(const absl::Status& status);

// Edits a request (and may build the files it names); an error is a setup
// failure, not an outcome.
using RequestEdit =
    std::function<absl::Status(BadInputEnv&, v1::CreateJobRequest&)>;

// CreateJob with the good request after `edit`: refused (kCreateJob) or a
// job (kJob, job_id set).
Observation CreateWith(BadInputEnv& env, const RequestEdit& edit);

// A row whose action is CreateWith(env, edit).
BadInputCase CreateCase(std::string name, std::string input, Expectation expect,
                        RequestEdit edit);

// UploadCalibration of `bytes` as `filename`: refused (kUploadCalibration,
// unstored_sha256 set), or accepted and then CreateWith the uploaded set
// as the calibration and `edit` applied.
Observation UploadThenCreate(BadInputEnv& env, const std::string& filename,
                             const std::string& bytes, const RequestEdit& edit);

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_CASE_ACTIONS_H_
