// What a job was asked to do, as stored in the job store's spec_json: the
// validated request with its resolved paths, so workers need not resolve
// URIs again. Also the store::Job -> quant.v1.Job conversion.
//
// spec_json keys: checkpoint {uri, path, blocks}, recipe (RecipeToJson's
// object, a valid recipe file), calibration {sha256, path, sources: [{sha256,
// path, weight}] (only for a mixed set)}, labels,
// pinned {chat_template_sha256, tasks_sha256} (absent when neither),
// warnings (absent in specs written before it existed), work
// {calibration_tokens, heldout_tokens, blocks: [[forward, hessian, gptq]
// flops per block], finalize: [...]} (absent before estimates existed).
#ifndef QUANT_SERVER_JOB_SPEC_H_
#define QUANT_SERVER_JOB_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/estimate/work_model.h"
#include "core/pipeline/round_job_tasks.h"
#include "core/recipe/recipe.h"
#include "quant/v1/service.pb.h"
#include "server/store/job_store.h"

namespace quant::server {

// One source of a mixed calibration set (recipe calibration.sources) as
// resolved at submit.
struct CalibrationSourceSpec {
  std::string sha256;
  std::string path;  // Real path: an uploaded set's or under an allowed root.
  double weight = 1.0;
};

struct JobSpec {
  std::string checkpoint_uri;
  std::string checkpoint_path;  // Real path, under an allowed root.
  int num_blocks = 0;           // Decoder layers.
  Recipe recipe;
  // One set: its sha256 and path. A mixed set (calibration_sources): the
  // mix's identity (core/calib/mixed_calibration.h) and no path.
  std::string calibration_sha256;
  std::string calibration_path;
  std::vector<CalibrationSourceSpec> calibration_sources;
  // The files the recipe names, pinned by content at submit (the chat
  // template the set is rendered with, gates.tasks); empty when none.
  std::string chat_template_sha256;
  std::string tasks_sha256;
  std::map<std::string, std::string> labels;
  // recipe gates.compare_to resolved at submit: a job's id (its checkpoint
  // in the artifact store, found when a task is leased) or a real path
  // under an allowed root. Both empty: no comparison.
  std::string previous_job_id;
  std::string previous_path;
  // What the submitter should know but need not fix (an override that
  // matches no layer); shown on the job.
  std::vector<std::string> warnings;
  // The job's work counted from its plan, for its time estimate (absent in
  // specs written before estimates existed).
  std::optional<JobWork> work;
  // Set at submit when the job's blocks run as rounds of small tasks
  // (core/pipeline/round_job_tasks.h: sequential propagation, no
  // mixture-of-experts block): the shards the plan has per split. Absent:
  // one task per block (and every spec written before rounds existed).
  std::optional<RoundShardCounts> rounds;
  // The finalize's held-out evaluation as this many gate_part tasks, which
  // several workers share (task_plan.h's SplitFinalize); 0: one finalize
  // task (and every spec written before parts existed).
  int gate_parts = 0;
};
// The most gate parts a job may be planned with.
inline constexpr int kMaxGateParts = 1024;

std::string JobSpecToJson(const JobSpec& spec);
// Internal when the stored text is not a spec this code wrote.
absl::StatusOr<JobSpec> JobSpecFromJson(const std::string& json);

class JobEta;

// The API view of a stored job. `tasks` (the job's plan) gives the block
// counts of its progress; `eta` (when given) its elapsed time and ETA.
absl::StatusOr<v1::Job> JobToProto(const store::Job& job,
                                   const std::vector<store::Task>& tasks,
                                   const JobEta* eta = nullptr);

v1::JobState JobStateToProto(store::JobState state);

// A job's block tasks counted: blocks and their linear layers done, the
// running blocks' layers from their reported progress (rounded down).
struct BlockProgress {
  int blocks_total = 0;
  int blocks_done = 0;
  int64_t layers_total = 0;
  int64_t layers_done = 0;
};
BlockProgress CountBlockProgress(const std::vector<store::Task>& tasks);

// The progress line after round task `done` of a block run as rounds
// completed, from the job's tasks: "block 3 group 1: 5/9 shards gathered",
// "block 3 group 1 quantized", "block 3 group 0: k_proj quantized (2/3
// layers)", "block 3: 4/9 shards out".
std::string DescribeRoundProgress(const std::vector<store::Task>& tasks,
                                  const store::Task& done);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_SPEC_H_
