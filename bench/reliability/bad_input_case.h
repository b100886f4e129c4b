// One row of the bad-input table: an input, what it must produce (where it
// is refused, with which status, naming what), and the action that sends it
// through the service. The checks every row shares live in the runner.
#ifndef QUANT_BENCH_RELIABILITY_BAD_INPUT_CASE_H_
#define QUANT_BENCH_RELIABILITY_BAD_INPUT_CASE_H_

#include <functional>
#include <string>
#include <vector>

#include "bench/reliability/bad_input_env.h"
#include "quant/v1/service.pb.h"

namespace quant::reliability {

// Where an input is refused (or, for kJob, where it is finally judged).
enum class Stage {
  kUploadCalibration,
  kCreateJob,
  kQuantctl,  // quantctl itself, before any call (e.g. its recipe check).
  kJob,       // CreateJob accepted it; the job's run decides.
};
const char* StageName(Stage stage);

struct Expectation {
  Stage stage = Stage::kCreateJob;
  // A gRPC code name ("INVALID_ARGUMENT"), a job state for kJob
  // ("FAILED", "SUCCEEDED"), or "exit N" for kQuantctl.
  std::string status;
  // Each must appear in the message: the bad field, path, tensor or line.
  std::vector<std::string> names;
};

// What a case's action saw.
struct Observation {
  Stage stage = Stage::kCreateJob;
  std::string status;   // As in Expectation.
  std::string message;  // The error message (or, for a job, its error).
  std::string job_id;   // Set when a job was created.
  // A calibration set that must not be stored afterwards ("" = none).
  std::string unstored_sha256;
  // Things the action itself found wrong (setup failures included).
  std::vector<std::string> problems;
};

struct BadInputCase {
  std::string name;   // "checkpoint/nan_weight"
  std::string input;  // What was sent, in a few words.
  Expectation expect;
  // Other outcomes that are as good (e.g. a check moved from the job's run
  // to CreateJob).
  std::vector<Expectation> also_accepted;
  std::function<Observation(BadInputEnv&)> act;
  // Extra checks on a created job once it is terminal: the problems found;
  // `summary` may say what was seen, for the message column.
  std::function<std::vector<std::string>(BadInputEnv&, const v1::Job&,
                                         std::string* summary)>
      check_job;
};

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_BAD_INPUT_CASE_H_
