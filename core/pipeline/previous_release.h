// The previous release a job compares with (recipe gates.compare_to): its
// packed checkpoint, checked before anything is measured against it (its
// manifest.json verifies, when it has one; the model is the source's
// architecture), then evaluated against the unquantized source on the job's
// held-out windows, the same windows and arithmetic as the new checkpoint,
// so that the two perplexities are comparable number for number.
#ifndef QUANT_CORE_PIPELINE_PREVIOUS_RELEASE_H_
#define QUANT_CORE_PIPELINE_PREVIOUS_RELEASE_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/forward/block_weights.h"
#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "nlohmann/json.hpp"

namespace quant {

struct PreviousRelease {
  std::string compare_to;  // As the recipe wrote it.
  std::string dir;         // Where it was read.
  // sha256 of its manifest.json; empty when it has none (a checkpoint
  // another tool wrote).
  std::string manifest_sha256;
  std::string job_id;   // Its manifest's job.id; empty when none.
  std::string verdict;  // Its manifest's output.verdict; empty when none.
  std::string method;   // Its manifest's recipe.method; empty when none.
  // Its manifest's recipe uses AWQ (method or an override): the scales of
  // layers fed by another linear layer (o_proj, down_proj) were folded into
  // that layer (v_proj, up_proj) and cannot be read back, so those layers
  // are not compared one by one.
  bool used_awq = false;
  std::unique_ptr<Checkpoint> checkpoint;  // Opened with allow_packed.
};

// The previous release's linear layers of one block in the source's units,
// for the per-layer comparison on the same inputs: a layer that reads a norm
// the previous release rescaled (AWQ folds 1/s into input_layernorm or
// post_attention_layernorm) is multiplied back by previous / source norm per
// input channel, so that X·Wᵀ on the source's normalized inputs is what the
// previous model computes. Layers fed by another linear layer are left out
// when `linear_fed` is false (PreviousRelease::used_awq).
std::map<LayerType, RowMatrixF> PreviousLayersInSourceUnits(
    const BlockWeights& source, const BlockWeights& previous, bool linear_fed);

// Whether `compare_to` names a quantd job ("job-000042") rather than a
// directory.
bool IsJobId(const std::string& compare_to);

// The directory a run without quantd compares with: `compare_to` as a path
// (relative to the working directory) or a file:///absolute URI.
// InvalidArgument naming gates.compare_to for a job id, which only quantd
// can resolve.
absl::StatusOr<std::string> LocalPreviousReleaseDir(
    const std::string& compare_to);

struct PreviousReleaseCheck {
  // Hash every file against manifest.json (as `quantctl verify`): a full
  // read of the checkpoint. Off where only its shape matters now and the
  // finalize verifies it later (quantd's submit, which must answer fast).
  bool verify_manifest = true;
  FileSystem* file_system = nullptr;  // Null: the default.
};

// Opens the previous release at `dir`. Errors name gates.compare_to:
// FailedPrecondition when its files do not match its manifest.json or its
// model is not `source`'s architecture (hidden size, layers, heads, MLP
// width, vocabulary); the Checkpoint's errors when it cannot be opened.
absl::StatusOr<PreviousRelease> OpenPreviousRelease(
    const std::string& compare_to, const std::string& dir,
    const ModelConfig& source, const PreviousReleaseCheck& check = {});

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_PREVIOUS_RELEASE_H_
