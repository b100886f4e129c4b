// The round tasks of a sequential dense block from files, as a worker runs
// them.
#include "core/pipeline/round_job_tasks.h"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/base/directory_util.h"
#include "core/base/file_digests.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/hidden_state_stream.h"
#include "core/pipeline/internal/job_inputs.h"
#include "core/pipeline/job_inputs_cache.h"
#include "core/pipeline/round_block_cache.h"
#include "core/pipeline/round_state_io.h"
#include "core/pipeline/shard_stash_cache.h"
#include "core/pipeline/shard_statistics_io.h"
#include "core/pipeline/task_io.h"

namespace quant {
namespace {

using pipeline_internal::BlockInputFromWeights;
using pipeline_internal::BlockPublished;
using pipeline_internal::EmbedShardStates;
using pipeline_internal::JobBlockWeights;
using pipeline_internal::JobChosenPlan;
using pipeline_internal::JobInputs;
using pipeline_internal::LoadJobBlockWeights;
using pipeline_internal::OpenJobInputs;

using SourcePtr = std::unique_ptr<HiddenStateSource>;
using InputsPtr = std::shared_ptr<const JobInputs>;

// The job's inputs: the process's cached ones when the context has a
// cache (a worker), else opened for this task.
absl::StatusOr<InputsPtr> OpenInputs(const JobTaskContext& context,
                                     const TaskControl& control) {
  if (context.inputs_cache != nullptr) {
    return context.inputs_cache->Open(context, control);
  }
  QUANT_ASSIGN_OR_RETURN(JobInputs inputs, OpenJobInputs(context, control));
  return std::make_shared<const JobInputs>(std::move(inputs));
}

// One shard task's stash (ShardRoundStash): taken from the context's cache
// (empty when it has none for the shard), and given back by Keep() once the
// task's file is published; a task that fails keeps nothing.
class KeptShardStash {
 public:
  KeptShardStash(const JobTaskContext& context, int block, bool calibration,
                 int shard)
      : cache_(context.shard_stashes) {
    if (cache_ == nullptr) return;
    key_ = ShardStashCache::Key(context.job_id, context.work_dir, block,
                                calibration, shard);
    stash_ = cache_->Take(key_);
  }
  // Null without a cache: the task computes its block from the shard's
  // entering states.
  ShardRoundStash* get() { return cache_ != nullptr ? &stash_ : nullptr; }
  void Keep() {
    if (cache_ != nullptr) cache_->Put(key_, std::move(stash_));
  }

 private:
  ShardStashCache* const cache_;
  std::string key_;
  ShardRoundStash stash_;
};

constexpr char kChangedRoundFilePayload[] =
    "type.googleapis.com/quant.ChangedRoundFile";

void Stage(const TaskControl& control, const std::string& what) {
  if (control.on_stage) control.on_stage(what);
}

const char* SplitName(bool calibration) {
  return calibration ? "calibration" : "held-out";
}

absl::Status ChangedRoundFileError(const std::string& name,
                                   std::string message) {
  absl::Status status = absl::DataLossError(std::move(message));
  status.SetPayload(kChangedRoundFilePayload, absl::Cord(name));
  return status;
}

// FailedPrecondition naming what `what` waits for when round file `name`
// is not published yet; then its recorded sha256 (VerifyRoundFile).
absl::StatusOr<std::string> NeedRoundFile(const JobTaskContext& context,
                                          const std::string& name,
                                          const std::string& what) {
  if (!FileExists(JoinPath(context.work_dir, name)) &&
      context.round_file_sha256.count(name) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " needs ", name, ", which is not in ", context.work_dir, " yet"));
  }
  return VerifyRoundFile(context, name);
}

// Moves `attempt_path` to round file `name` in the work directory.
absl::Status PublishRoundFile(const JobTaskContext& context,
                              const std::string& attempt_path,
                              const std::string& name) {
  const std::string path = JoinPath(context.work_dir, name);
  const std::string dir = ParentDirectory(path);
  if (!IsDirectory(dir)) {
    absl::Status made = MakeDirectory(dir, context.file_system);
    if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  }
  absl::Status renamed = context.file_system->RenameFile(attempt_path, path);
  if (!renamed.ok()) {
    return absl::Status(renamed.code(), absl::StrCat("publishing ", name, ": ",
                                                     renamed.message()));
  }
  return context.file_system->SyncDirectory(dir);
}

// Where an attempt writes round file `name` before publishing it.
absl::StatusOr<std::string> AttemptPath(const JobTaskContext& context,
                                        const std::string& attempt_dir,
                                        const std::string& name) {
  if (!IsDirectory(attempt_dir)) {
    absl::Status made = MakeDirectory(attempt_dir, context.file_system);
    if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  }
  return JoinPath(attempt_dir, absl::StrReplaceAll(name, {{"/", "."}}));
}

const TokenWindows& Windows(const JobInputs& inputs, bool calibration) {
  return calibration ? inputs.split.calibration : inputs.split.heldout;
}

std::vector<SequenceRange> Shards(const JobInputs& inputs, bool calibration) {
  return PlanShards(
      static_cast<int64_t>(Windows(inputs, calibration).lengths.size()));
}

// Checks that `block` of the job runs as rounds and `group` is one of its
// groups, or, for the `output` round, kBlockRoundGroups.
absl::Status CheckRoundTask(const JobTaskContext& context,
                            const JobInputs& inputs, int block, int group,
                            bool output = false) {
  const ModelConfig& config = inputs.checkpoint->config();
  if (block < 0 || block >= config.num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", block, " is outside the model's 0..",
                     config.num_hidden_layers - 1));
  }
  if (group < 0 || group > kBlockRoundGroups ||
      (group == kBlockRoundGroups) != output) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group ", group, " is outside a block's 0..", kBlockRoundGroups - 1));
  }
  if (!JobRunsAsRounds(config, context.recipe)) {
    return absl::FailedPreconditionError(
        "this job's blocks do not run as rounds (independent propagation or "
        "a mixture-of-experts model): run them as block tasks");
  }
  return absl::OkStatus();
}

// One round task's block: taken from the context's cache when it keeps
// this block (RoundBlockCache), else loaded; given back by Keep() once the
// task succeeded (a task that fails keeps nothing).
class LoadedRoundBlock {
 public:
  LoadedRoundBlock(const JobTaskContext& context, int block)
      : context_(context), block_(block), cache_(context.round_blocks) {
    if (cache_ == nullptr) return;
    key_ = RoundBlockCache::Key(context.job_id, context.work_dir, block);
    kept_ = cache_->Take(key_);
  }

  // The block's input for its rounds (no hidden states).
  absl::StatusOr<BlockTaskInput> Input(const JobInputs& inputs,
                                       const TaskControl& control) {
    QUANT_ASSIGN_OR_RETURN(const std::optional<QuantizationPlan> chosen,
                           JobChosenPlan(context_, inputs, control));
    JobBlockWeights loaded;
    if (kept_.has_value()) {
      loaded.weights = std::move(kept_->weights);
      loaded.previous = std::move(kept_->previous);
    } else {
      QUANT_ASSIGN_OR_RETURN(loaded, LoadJobBlockWeights(inputs, block_));
    }
    return BlockInputFromWeights(context_, inputs, block_, chosen, control,
                                 std::move(loaded));
  }

  // The block's state after its first `groups` reduces: the input weights
  // with their deltas applied in order, or the kept state with the deltas
  // since. `after_last_reduce`: the deltas are checked against the block's
  // published layers.json (which records them), otherwise against the
  // coordinator's record of each.
  absl::StatusOr<BlockRoundState> State(const BlockTaskInput& input, int groups,
                                        bool after_last_reduce) {
    if (after_last_reduce && !BlockPublished(context_.work_dir, block_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("block ", block_,
                       "'s shard outputs need its last reduce's output, "
                       "which is not in ",
                       context_.work_dir, " yet"));
    }
    // Every delta is checked, kept state or not.
    std::vector<std::vector<std::string>> names(groups);
    applied_.clear();
    for (int g = 0; g < groups; ++g) {
      for (const std::optional<LayerType>& layer :
           RoundGroupReduces(g, context_.round_layer_reduces)) {
        const std::string name = RoundDeltaFile(block_, g, layer);
        std::string digest;
        if (after_last_reduce) {
          auto recorded = context_.block_output_sha256.find(block_);
          QUANT_RETURN_IF_ERROR(VerifyBlockFile(
              context_.work_dir, block_, RoundDeltaSuffix(g, layer),
              recorded == context_.block_output_sha256.end() ? ""
                                                             : recorded->second,
              context_.file_system, context_.file_digests));
        } else {
          QUANT_ASSIGN_OR_RETURN(
              digest, NeedRoundFile(
                          context_, name,
                          absl::StrCat("block ", block_, "'s group ", groups)));
        }
        if (cache_ != nullptr && digest.empty()) {
          QUANT_ASSIGN_OR_RETURN(
              digest, Sha256FileWith(context_.file_digests,
                                     JoinPath(context_.work_dir, name),
                                     context_.file_system));
        }
        names[g].push_back(name);
        applied_.emplace_back(name, std::move(digest));
      }
    }
    BlockRoundState state;
    if (KeptStateFits(groups)) {
      state = std::move(*kept_->state);
    } else {
      QUANT_ASSIGN_OR_RETURN(state, StartBlockRounds(input));
    }
    if (kept_.has_value()) kept_->state.reset();
    for (int g = state.groups_done; g < groups; ++g) {
      std::vector<BlockRoundDelta> parts;
      for (const std::string& name : names[g]) {
        QUANT_ASSIGN_OR_RETURN(BlockRoundDelta delta,
                               ReadRoundDelta(JoinPath(context_.work_dir, name),
                                              context_.file_system));
        parts.push_back(std::move(delta));
      }
      QUANT_ASSIGN_OR_RETURN(const BlockRoundDelta delta,
                             parts.size() == 1
                                 ? std::move(parts[0])
                                 : MergeLayerDeltas(std::move(parts)));
      QUANT_RETURN_IF_ERROR(ApplyRoundDelta(delta, &state));
    }
    return state;
  }

  // The sha256 State() checked `name` to have, when it hashed it: what the
  // state was built from. Empty otherwise.
  std::string AppliedDigest(const std::string& name) const {
    for (const auto& [applied, digest] : applied_) {
      if (applied == name) return digest;
    }
    return "";
  }

  // Gives the block back to the cache: `input`'s weights and `state`, the
  // one State() returned (or a copy of it taken before changing it).
  void Keep(BlockTaskInput input, BlockRoundState state) {
    if (cache_ == nullptr) return;
    RoundBlock kept;
    kept.weights = std::move(input.weights);
    kept.previous = std::move(input.previous);
    kept.state = std::move(state);
    kept.applied = std::move(applied_);
    cache_->Put(key_, std::move(kept));
  }

 private:
  // Whether the kept state is the state after some of the first `groups`
  // reduces, from the same files the task just checked.
  bool KeptStateFits(int groups) const {
    if (!kept_.has_value() || !kept_->state.has_value()) return false;
    const BlockRoundState& state = *kept_->state;
    if (state.groups_done > groups) return false;
    const std::vector<std::pair<std::string, std::string>>& kept =
        kept_->applied;
    if (kept.size() > applied_.size()) return false;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i] != applied_[i] || kept[i].second.empty()) return false;
    }
    // Each of the kept state's groups is covered whole.
    size_t parts = 0;
    for (int g = 0; g < state.groups_done; ++g) {
      parts += RoundGroupReduces(g, context_.round_layer_reduces).size();
    }
    return parts == kept.size();
  }

  const JobTaskContext& context_;
  const int block_;
  RoundBlockCache* const cache_;
  std::string key_;
  std::optional<RoundBlock> kept_;
  // The deltas State() applied, by name, with their sha256.
  std::vector<std::pair<std::string, std::string>> applied_;
};

// The states entering `block` for shard `range` (shard `shard`) of a split.
absl::StatusOr<SourcePtr> EnteringShard(const JobTaskContext& context,
                                        const JobInputs& inputs, int block,
                                        bool calibration, int shard,
                                        SequenceRange range) {
  if (block == 0) return EmbedShardStates(inputs, calibration, range);
  const std::string name = ShardOutputFile(block - 1, calibration, shard);
  QUANT_RETURN_IF_ERROR(
      NeedRoundFile(context, name,
                    absl::StrCat("block ", block, "'s ", SplitName(calibration),
                                 " shard ", shard))
          .status());
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFile> file,
                         HiddenStateFile::Open(JoinPath(context.work_dir, name),
                                               context.file_system));
  const TokenWindows& windows = Windows(inputs, calibration);
  const std::vector<int> lengths(
      windows.lengths.begin() + range.first,
      windows.lengths.begin() + range.first + range.count);
  if (file->seq_len() != windows.seq_len || file->lengths() != lengths ||
      file->hidden_size() != inputs.checkpoint->config().hidden_size) {
    return absl::DataLossError(absl::StrCat(
        name, ": holds ", file->sequences(), " sequences of ", file->seq_len(),
        " x ", file->hidden_size(), ", not the shard's ", lengths.size(),
        " of ", windows.seq_len, " x ", inputs.checkpoint->config().hidden_size,
        " with the split's lengths"));
  }
  return SourcePtr(std::move(file));
}

// The shard's sequences, or nullopt for a shard past the split's end.
absl::StatusOr<std::optional<SequenceRange>> ShardRange(const JobInputs& inputs,
                                                        bool calibration,
                                                        int shard) {
  if (shard < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard, " is negative"));
  }
  const std::vector<SequenceRange> shards = Shards(inputs, calibration);
  if (static_cast<size_t>(shard) >= shards.size()) return std::nullopt;
  return shards[shard];
}

}  // namespace

RoundShardCounts PlanRoundShardCounts(const Recipe& recipe) {
  const CalibrationSettings& c = recipe.calibration;
  auto shards = [](int sequences) {
    return static_cast<int>((sequences + kShardSequences - 1) /
                            kShardSequences);
  };
  RoundShardCounts counts;
  counts.calibration = shards(c.samples);
  const bool heldout_documents = c.heldout_count > 0 || c.heldout_fraction > 0;
  counts.heldout =
      heldout_documents
          ? shards(c.heldout_samples > 0 ? c.heldout_samples : c.samples)
          : 0;
  counts.layer_reduces = RoundReducesByLayer(recipe);
  counts.heldout_later = counts.heldout > 0 && RoundReducesByLayer(recipe);
  return counts;
}

bool JobRunsAsRounds(const ModelConfig& config, const Recipe& recipe) {
  if (recipe.propagation != Propagation::kSequential) return false;
  // The first task measures a mixed-precision selection; every shard task
  // of the first round would measure it at once.
  if (recipe.mixed_precision.has_value()) return false;
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    if (config.IsMoeBlock(b)) return false;
  }
  return true;
}

absl::StatusOr<std::string> RunShardStatisticsJobTask(
    const JobTaskContext& context, int block, int group, bool calibration,
    int shard, const std::string& attempt_dir, const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(const InputsPtr opened, OpenInputs(context, control));
  const JobInputs& inputs = *opened;
  QUANT_RETURN_IF_ERROR(CheckRoundTask(context, inputs, block, group));
  QUANT_ASSIGN_OR_RETURN(const std::optional<SequenceRange> range,
                         ShardRange(inputs, calibration, shard));
  if (!range.has_value()) return std::string();
  Stage(control, absl::StrCat("block ", block, " group ", group, ": ",
                              SplitName(calibration), " shard ", shard));
  LoadedRoundBlock loaded(context, block);
  QUANT_ASSIGN_OR_RETURN(BlockTaskInput input, loaded.Input(inputs, control));
  QUANT_ASSIGN_OR_RETURN(BlockRoundState state,
                         loaded.State(input, group, false));
  QUANT_ASSIGN_OR_RETURN(
      const SourcePtr entering,
      EnteringShard(context, inputs, block, calibration, shard, *range));
  const std::vector<int>& lengths = Windows(inputs, calibration).lengths;
  const int64_t first_token = std::accumulate(
      lengths.begin(), lengths.begin() + range->first, int64_t{0});
  KeptShardStash stash(context, block, calibration, shard);
  QUANT_ASSIGN_OR_RETURN(
      const std::unique_ptr<GroupActivationStatistics> statistics,
      GatherShardStatistics(input, state, calibration, *entering, first_token,
                            stash.get()));
  if (statistics == nullptr) return std::string();
  const std::string name =
      ShardStatisticsFile(block, group, calibration, shard);
  QUANT_ASSIGN_OR_RETURN(const std::string attempt,
                         AttemptPath(context, attempt_dir, name));
  QUANT_RETURN_IF_ERROR(
      WriteShardStatistics(attempt, *statistics, context.file_system));
  QUANT_RETURN_IF_ERROR(PublishRoundFile(context, attempt, name));
  stash.Keep();
  loaded.Keep(std::move(input), std::move(state));
  return name;
}

// Each layer group's held-out sums for the block's last reduce (`state`
// after it): the held-out shards' statistics of the group's round, added
// in shard order (as a reduce given them adds them). A group with no
// quantized layer (its round published no statistics, or the format held
// none of its layers) gets empty sums.
absl::StatusOr<std::vector<HessianAccumulator>> ReadHeldoutSums(
    const JobTaskContext& context, const JobInputs& inputs,
    const BlockRoundState& state, int block) {
  const int shards =
      static_cast<int>(Shards(inputs, /*calibration=*/false).size());
  const std::vector<int64_t> columns = BlockRoundsHeldoutColumns(state);
  std::vector<HessianAccumulator> sums;
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    const int64_t k = columns[g];
    HessianAccumulator& sum = sums.emplace_back(k);
    if (k == 0) continue;
    for (int shard = 0; shard < shards; ++shard) {
      const std::string name =
          ShardStatisticsFile(block, g, /*calibration=*/false, shard);
      QUANT_RETURN_IF_ERROR(
          NeedRoundFile(context, name,
                        absl::StrCat("block ", block, "'s held-out audit"))
              .status());
      QUANT_ASSIGN_OR_RETURN(ShardSums read,
                             ReadShardSums(JoinPath(context.work_dir, name), k,
                                           context.file_system));
      if (read.heldout.token_count() > 0) {
        QUANT_RETURN_IF_ERROR(sum.Merge(read.heldout));
      }
    }
  }
  return sums;
}

absl::StatusOr<std::string> RunRoundReduceJobTask(
    const JobTaskContext& context, int block, int group,
    std::optional<LayerType> layer, const std::string& attempt_dir,
    const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(const InputsPtr opened, OpenInputs(context, control));
  const JobInputs& inputs = *opened;
  QUANT_RETURN_IF_ERROR(CheckRoundTask(context, inputs, block, group));
  const std::vector<std::optional<LayerType>> reduces =
      RoundGroupReduces(group, context.round_layer_reduces);
  if (std::find(reduces.begin(), reduces.end(), layer) == reduces.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer: group ", group, " of this job is reduced ",
        reduces.size() > 1 ? "a layer at a time" : "whole", ", so a reduce ",
        layer.has_value() ? absl::StrCat("of ", LayerTypeName(*layer))
                          : std::string("of the whole group"),
        " is not one of its tasks"));
  }
  if (block == 0 && group == 0 && layer == reduces.front()) {
    // Fail the job at its first reduce, not hours later at the bad block.
    Stage(control, "checking every weight is finite");
    QUANT_RETURN_IF_ERROR(inputs.checkpoint->CheckAllFinite());
  }
  LoadedRoundBlock loaded(context, block);
  QUANT_ASSIGN_OR_RETURN(BlockTaskInput input, loaded.Input(inputs, control));
  QUANT_ASSIGN_OR_RETURN(BlockRoundState state,
                         loaded.State(input, group, false));
  Stage(control,
        absl::StrCat("block ", block, " group ", group,
                     layer.has_value()
                         ? absl::StrCat(" ", LayerTypeName(*layer), ": ")
                         : std::string(": "),
                     "adding the shards and quantizing"));
  const int calibration_shards =
      static_cast<int>(Shards(inputs, /*calibration=*/true).size());
  const int heldout_shards =
      context.round_heldout_later
          ? 0
          : static_cast<int>(Shards(inputs, /*calibration=*/false).size());
  QUANT_ASSIGN_OR_RETURN(
      std::vector<std::unique_ptr<GroupActivationStatistics>> read,
      EmptyShardStatistics(input, state, calibration_shards + heldout_shards));
  for (size_t i = 0; i < read.size(); ++i) {
    const bool calibration = static_cast<int>(i) < calibration_shards;
    const int shard = calibration ? static_cast<int>(i)
                                  : static_cast<int>(i) - calibration_shards;
    const std::string name =
        ShardStatisticsFile(block, group, calibration, shard);
    QUANT_RETURN_IF_ERROR(
        NeedRoundFile(
            context, name,
            absl::StrCat("block ", block, "'s group ", group, " reduce"))
            .status());
    QUANT_RETURN_IF_ERROR(ReadShardStatistics(
        JoinPath(context.work_dir, name), read[i].get(), context.file_system));
  }
  std::vector<const GroupActivationStatistics*> shards;
  for (const auto& s : read) shards.push_back(s.get());
  BlockRoundState before = state;
  RoundReduceOptions reduce;
  reduce.layer = layer;
  reduce.heldout_later = context.round_heldout_later;
  QUANT_RETURN_IF_ERROR(ReduceBlockRound(input, shards, &state, reduce));
  const std::vector<LayerType> types = layer.has_value()
                                           ? std::vector<LayerType>{*layer}
                                           : BlockRoundGroupTypes(group);
  auto in_this_reduce = [&types](const LayerResult& result) {
    return std::find(types.begin(), types.end(), result.type) != types.end();
  };
  const bool audits_block =
      context.round_heldout_later && group + 1 == kBlockRoundGroups;
  // The last reduce reports its layers once their audits are complete.
  if (control.on_layer && !audits_block) {
    for (const LayerResult& result : state.layers) {
      if (in_this_reduce(result)) control.on_layer(result);
    }
  }
  QUANT_ASSIGN_OR_RETURN(const BlockRoundDelta delta,
                         DiffRoundState(before, state));
  const std::string name = RoundDeltaFile(block, group, layer);
  QUANT_ASSIGN_OR_RETURN(const std::string attempt,
                         AttemptPath(context, attempt_dir, name));
  QUANT_RETURN_IF_ERROR(WriteRoundDelta(attempt, delta, context.file_system));
  QUANT_RETURN_IF_ERROR(PublishRoundFile(context, attempt, name));
  if (group + 1 < kBlockRoundGroups) {
    loaded.Keep(std::move(input), std::move(before));
    return name;
  }

  // The last reduce: the block's output, recording every delta's sha256
  // for the shard-output tasks: those the state was built from as checked
  // then (not hashed again), the one just written hashed.
  std::map<std::string, std::string> delta_sha256;
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    for (const std::optional<LayerType>& part :
         RoundGroupReduces(g, context.round_layer_reduces)) {
      const std::string file = RoundDeltaFile(block, g, part);
      std::string digest = loaded.AppliedDigest(file);
      if (digest.empty()) {
        QUANT_ASSIGN_OR_RETURN(digest,
                               Sha256FileWith(context.file_digests,
                                              JoinPath(context.work_dir, file),
                                              context.file_system));
      }
      delta_sha256[RoundDeltaSuffix(g, part)] = std::move(digest);
    }
  }
  if (context.round_heldout_later) {
    Stage(control, absl::StrCat("block ", block,
                                ": auditing every layer on the held-out "
                                "shards"));
    QUANT_ASSIGN_OR_RETURN(const std::vector<HessianAccumulator> heldout,
                           ReadHeldoutSums(context, inputs, state, block));
    QUANT_RETURN_IF_ERROR(AuditBlockRoundsHeldout(input, heldout, &state));
    for (const LayerResult& result : state.layers) {
      if (in_this_reduce(result)) {
        if (control.on_layer) control.on_layer(result);
      } else if (result.quantized && control.on_audited) {
        control.on_audited(result);
      }
    }
  }
  QUANT_ASSIGN_OR_RETURN(BlockTaskOutput output,
                         FinishBlockRounds(input, std::move(state)));
  QUANT_RETURN_IF_ERROR(WriteBlockOutput(
      attempt_dir, output, context.file_system, delta_sha256, context.threads));
  QUANT_RETURN_IF_ERROR(PublishBlockOutput(attempt_dir, context.work_dir, block,
                                           context.file_system,
                                           /*leaving_states=*/false));
  loaded.Keep(std::move(input), std::move(before));
  return BlockLayersFile(block);
}

absl::StatusOr<std::string> RunShardOutputJobTask(
    const JobTaskContext& context, int block, bool calibration, int shard,
    const std::string& attempt_dir, const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(const InputsPtr opened, OpenInputs(context, control));
  const JobInputs& inputs = *opened;
  QUANT_RETURN_IF_ERROR(CheckRoundTask(context, inputs, block,
                                       kBlockRoundGroups, /*output=*/true));
  QUANT_ASSIGN_OR_RETURN(const std::optional<SequenceRange> range,
                         ShardRange(inputs, calibration, shard));
  if (!range.has_value()) return std::string();
  Stage(control, absl::StrCat("block ", block, ": the ", SplitName(calibration),
                              " shard ", shard, "'s leaving states"));
  LoadedRoundBlock loaded(context, block);
  QUANT_ASSIGN_OR_RETURN(BlockTaskInput input, loaded.Input(inputs, control));
  QUANT_ASSIGN_OR_RETURN(BlockRoundState state,
                         loaded.State(input, kBlockRoundGroups, true));
  QUANT_ASSIGN_OR_RETURN(
      const SourcePtr entering,
      EnteringShard(context, inputs, block, calibration, shard, *range));
  const std::string name = ShardOutputFile(block, calibration, shard);
  QUANT_ASSIGN_OR_RETURN(const std::string attempt,
                         AttemptPath(context, attempt_dir, name));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFileWriter> sink,
                         HiddenStateFileWriter::Create(
                             attempt, entering->seq_len(), entering->lengths(),
                             entering->hidden_size(), context.file_system));
  KeptShardStash stash(context, block, calibration, shard);
  QUANT_RETURN_IF_ERROR(
      WriteShardOutput(input, state, *entering, sink.get(), stash.get()));
  QUANT_RETURN_IF_ERROR(PublishRoundFile(context, attempt, name));
  loaded.Keep(std::move(input), std::move(state));
  return name;
}

absl::StatusOr<std::string> VerifyRoundFile(const JobTaskContext& context,
                                            const std::string& name) {
  auto it = context.round_file_sha256.find(name);
  if (it == context.round_file_sha256.end()) return std::string();
  const std::string path = JoinPath(context.work_dir, name);
  absl::StatusOr<std::string> actual =
      Sha256FileWith(context.file_digests, path, context.file_system);
  if (!actual.ok() && absl::IsNotFound(actual.status())) {
    return ChangedRoundFileError(
        name, absl::StrCat(path,
                           ": gone since the task that wrote it "
                           "completed, so that task must run again"));
  }
  if (!actual.ok()) return actual.status();
  if (*actual == it->second) return actual;
  return ChangedRoundFileError(
      name, absl::StrCat(path, ": sha256 is ", *actual,
                         ", the coordinator recorded ", it->second,
                         " when the task that wrote it completed: the file "
                         "changed on disk since, so that task must run "
                         "again"));
}

std::optional<std::string> ChangedRoundFile(const absl::Status& status) {
  const auto payload = status.GetPayload(kChangedRoundFilePayload);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

}  // namespace quant
