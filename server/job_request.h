// Validation of a CreateJobRequest at submit time, before anything is
// stored: the checkpoint exists under an allowed root and is a supported,
// unquantized architecture; the recipe converts, is valid and plans over
// the checkpoint's layers; the calibration set is known (by sha256) or its
// file (by URI) has the expected hash and parses; labels have keys.
//
// Errors name the field: InvalidArgument, NotFound (calibration hash,
// missing checkpoint), FailedPrecondition (hash mismatch),
// PermissionDenied (URI outside the allowed roots).
#ifndef QUANT_SERVER_JOB_REQUEST_H_
#define QUANT_SERVER_JOB_REQUEST_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/pipeline/output_size.h"
#include "quant/v1/service.pb.h"
#include "server/job_spec.h"
#include "server/store/job_store.h"
#include "server/uri_policy.h"

namespace quant::server {

struct ValidatedJobRequest {
  JobSpec spec;
  // Set when the calibration came by URI: its size, for recording it in
  // the store once the job is accepted.
  bool calibration_from_uri = false;
  int64_t calibration_size_bytes = 0;
  // The packed checkpoint the plan writes (for the dry run).
  OutputSize output;
};

// Reads `store` (calibration sets) but changes nothing. With
// `calibration_optional` (the dry run) a request without a calibration is
// valid; one that names a set is still checked.
absl::StatusOr<ValidatedJobRequest> ValidateCreateJobRequest(
    const v1::CreateJobRequest& request, const UriPolicy& policy,
    store::JobStore& store, int64_t max_calibration_bytes,
    bool calibration_optional = false);

// 64 lowercase hex digits; InvalidArgument naming `field` otherwise.
absl::Status CheckSha256(const std::string& sha256, absl::string_view field);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_REQUEST_H_
