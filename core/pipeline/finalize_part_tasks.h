// The finalize as the service plans it when the gates' held-out evaluation
// runs in parts (docs/DATA_PARALLEL.md, step 8): a pack task stages the
// packed checkpoint in the job's work directory, gate-part tasks score one
// slice of the evaluation batches each, and the finalize task completes on
// the staged checkpoint and the parts. Each is safe to run again after a
// crash or a lost answer, and checks the files it reads against the
// sha256 the coordinator recorded (VerifyRoundFile), so a file changed on
// disk sends its producer to run again. Built on job_tasks.h's
// StageFinalizeJobTask, ScoreFinalizeJobPart and CompleteFinalizeJobTask;
// the published files are RunFinalizeJobTask's, byte for byte.
#ifndef QUANT_CORE_PIPELINE_FINALIZE_PART_TASKS_H_
#define QUANT_CORE_PIPELINE_FINALIZE_PART_TASKS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/pipeline/job_tasks.h"

namespace quant {

// The files in the job's work directory (names relative to it): the
// staged checkpoint, its record (what the pack task publishes, written
// last), and gate part `part`'s scores.
std::string StagedFinalizeDir();
std::string StagedFinalizeRecordFile();
std::string GatePartFile(int part);

// The batches [first, first + count) that part `part` of `parts` scores in
// an evaluation of `batches` batches: even slices, in order, together every
// batch once. A part may have none when there are more parts than batches.
std::pair<int64_t, int64_t> GatePartBatches(int64_t batches, int part,
                                            int parts);

// Stages the packed checkpoint under `attempt_dir` and publishes it into
// the work directory: the staged directory, then its record. Returns the
// record's path. What an earlier attempt left there (published, or a
// directory without its record from an attempt killed while publishing)
// is replaced: the task also runs again when a reader found the record
// changed.
absl::StatusOr<std::string> RunFinalizePackJobTask(
    const JobTaskContext& context, const std::string& attempt_dir,
    int64_t max_shard_bytes, const TaskControl& control);

// Scores part `part` of `parts` of the held-out evaluation on the staged
// checkpoint (its record checked first) and publishes GatePartFile(part).
// Returns the part file's path.
absl::StatusOr<std::string> RunGatePartJobTask(const JobTaskContext& context,
                                               int part, int parts,
                                               const TaskControl& control);

// The finalize on the staged checkpoint and the `parts` part files (each
// checked first), published at `artifact_dir`; a checkpoint published
// there already is reported as RunFinalizeJobTask does.
absl::StatusOr<FinalizeJobResult> RunFinalizeFromPartsJobTask(
    const JobTaskContext& context, int parts, const std::string& artifact_dir,
    const TaskControl& control);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_FINALIZE_PART_TASKS_H_
