// One decoder block through its four layer groups; see block_task.h.
#include "core/pipeline/block_task.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/thread_pool.h"
#include "core/forward/block_forward.h"
#include "core/forward/rope.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/layer_packing.h"

namespace quant {
namespace {

// One activation of one split kept between layer groups: [rows, width] in
// the layout of the hidden states (hidden_state_stream.h), appended a chunk
// at a time, then read a chunk at a time; in memory, or in a file removed
// with this object.
class KeptActivation {
 public:
  static absl::StatusOr<std::unique_ptr<KeptActivation>> Create(
      const HiddenStateSource& layout, int64_t width, std::string path,
      FileSystem* fs) {
    std::unique_ptr<KeptActivation> kept(new KeptActivation());
    kept->fs_ = fs;
    if (path.empty()) {
      auto memory = std::make_unique<MemoryHiddenStateSink>(
          layout.seq_len(), layout.lengths(), width);
      kept->memory_ = memory.get();
      kept->sink_ = std::move(memory);
    } else {
      QUANT_ASSIGN_OR_RETURN(kept->sink_, HiddenStateFileWriter::Create(
                                              path, layout.seq_len(),
                                              layout.lengths(), width, fs));
      kept->path_ = std::move(path);
    }
    return kept;
  }
  ~KeptActivation() {
    source_.reset();
    sink_.reset();
    if (!path_.empty() && finished_) (void)fs_->RemoveFile(path_);
  }

  absl::Status Append(const RowMatrixF& rows) { return sink_->Append(rows); }
  absl::Status Finish() {
    QUANT_RETURN_IF_ERROR(sink_->Finish());
    finished_ = true;
    if (memory_ != nullptr) {
      source_ = std::make_unique<OwnedHiddenStateSource>(
          std::move(memory_->states()));
      memory_ = nullptr;
    } else {
      QUANT_ASSIGN_OR_RETURN(source_, HiddenStateFile::Open(path_, fs_));
    }
    sink_.reset();
    return absl::OkStatus();
  }
  const HiddenStateSource& source() const { return *source_; }

 private:
  KeptActivation() = default;
  FileSystem* fs_ = nullptr;
  std::string path_;
  bool finished_ = false;
  std::unique_ptr<HiddenStateSink> sink_;
  MemoryHiddenStateSink* memory_ = nullptr;  // sink_, when in memory
  std::unique_ptr<HiddenStateSource> source_;
};

// What one split keeps between the groups of a sequential block.
struct SplitStash {
  std::unique_ptr<KeptActivation> context;     // [q,k,v] -> attention
  std::unique_ptr<KeptActivation> residual;    // hidden + o_proj(context)
  std::unique_ptr<KeptActivation> mlp_hidden;  // silu(gate) * up
};

class BlockRunner {
 public:
  // The layer groups of a dense block, in order (BlockRoundGroupTypes).
  static const std::vector<std::vector<LayerType>>& DenseGroups();
  // `calibration`/`heldout`, when set, replace the input's hidden states
  // (a round's shard).
  BlockRunner(const BlockTaskInput& input, const LayerProgress& progress,
              ThreadPool* pool, const HiddenStateSource* calibration = nullptr,
              const HiddenStateSource* heldout = nullptr)
      : input_(input),
        pool_(pool),
        config_(*input.config),
        recipe_(*input.recipe),
        progress_(progress),
        memory_calibration_(&input.calibration),
        memory_heldout_(&input.heldout),
        calibration_(calibration != nullptr ? calibration
                     : input.calibration_source != nullptr
                         ? input.calibration_source
                         : &memory_calibration_),
        heldout_(heldout != nullptr                ? heldout
                 : input.heldout_source != nullptr ? input.heldout_source
                                                   : &memory_heldout_),
        rope_(config_, std::max(calibration_->seq_len(), heldout_->seq_len())),
        working_(input.weights) {}

  absl::StatusOr<BlockTaskOutput> Run();

  // Rounds (block_task.h). StartRounds plans the layers; Restore sets the
  // state a round continues from, Save returns it.
  absl::Status StartRounds();
  void Restore(const BlockRoundState& state);
  BlockRoundState Save() &&;
  absl::StatusOr<std::unique_ptr<GroupActivationStatistics>> GatherShard(
      bool calibration, int64_t first_token);
  absl::Status Reduce(
      const std::vector<const GroupActivationStatistics*>& shards,
      std::optional<LayerType> only, bool heldout_later);
  absl::Status AuditHeldout(const std::vector<HessianAccumulator>& heldout);
  absl::StatusOr<std::unique_ptr<GroupActivationStatistics>> EmptyShard();
  absl::Status WriteShard(HiddenStateSink* sink) const {
    return round_stash_ != nullptr ? WriteStashedShard(sink)
                                   : WriteLeavingStates(*calibration_, sink);
  }
  // What a round's shard continues from and keeps (ShardRoundStash).
  void set_round_stash(ShardRoundStash* stash) { round_stash_ = stash; }
  absl::StatusOr<BlockTaskOutput> FinishRounds();

 private:
  // The weights the next group's inputs are computed with.
  const BlockWeights& Source() const {
    return recipe_.propagation == Propagation::kSequential ? working_
                                                           : input_.weights;
  }
  DType StoredDType(const std::string& name) const {
    auto it = input_.stored_dtypes.find(name);
    return it == input_.stored_dtypes.end() ? DType::kF32 : it->second;
  }
  // The block's own (non-expert) layer of `type`; null when it has none.
  const LayerResult* Result(LayerType type) const;
  // The weights a result's layer computes with now (an expert's too).
  const LinearWeights& WorkingLinear(const LayerResult& result) const;
  // A mixture-of-experts block's MLP input, real-token rows of a whole
  // split, computed with Source().
  absl::StatusOr<RowMatrixF> MlpInputRows(
      const HiddenStateSource& source) const;
  // Quantizes the experts on the MLP input of both splits; their results
  // follow the attention's in results_.
  absl::Status QuantizeMoe(BlockTaskOutput* output);
  LayerResult* Result(LayerType type) {
    return const_cast<LayerResult*>(std::as_const(*this).Result(type));
  }

  absl::Status PlanLayers();
  absl::Status CheckCancelled(const std::string& before) const;
  // One layer group: the layers to quantize and their statistics.
  struct GroupPlan {
    std::vector<LayerType> types;  // Every layer of the group.
    InputGroup group = InputGroup::kAttnIn;
    std::vector<GroupLayerInput> layers;  // The ones to quantize.
    std::vector<LayerType> quantized_types;
    GroupQuantizeOptions options;
    // Set when `layers` is not empty.
    std::optional<GroupActivationStatistics> statistics;
  };
  // `with_statistics` false: the plan's layers only (statistics of K x K
  // are allocated eagerly).
  GroupPlan PlanGroup(const std::vector<LayerType>& types,
                      bool with_statistics = true) const;
  // Adds the real-token rows of a chunk's group input to the plan's
  // statistics (nothing when it quantizes no layer).
  static absl::Status AddRows(GroupPlan& plan, const RowMatrixF& rows,
                              bool calibration, int64_t shard);
  // The input of layer group `group` for rows of whole sequences entering
  // the block, computed with Source().
  RowMatrixF GroupInput(InputGroup group, const RowMatrixF& hidden,
                        int seq_len) const;
  // Runs `compute` on the source's chunks, as many at once as the pool has
  // threads, then `consume` on each result in chunk order (so sums over
  // chunks come out the same on any number of threads). Checks for
  // cancellation before each round, naming `before`.
  template <typename Chunk>
  absl::Status ForEachChunk(
      const HiddenStateSource& source, const std::string& before,
      absl::FunctionRef<Chunk(const RowMatrixF& hidden,
                              const std::vector<int>& lengths)>
          compute,
      absl::FunctionRef<absl::Status(Chunk& chunk, int64_t shard)> consume)
      const {
    return ForEachIndexedChunk<Chunk>(
        source, before,
        [&](const RowMatrixF& hidden, const std::vector<int>& lengths, size_t) {
          return compute(hidden, lengths);
        },
        consume);
  }
  // The same, `compute` also given the chunk's index in the source.
  template <typename Chunk>
  absl::Status ForEachIndexedChunk(
      const HiddenStateSource& source, const std::string& before,
      absl::FunctionRef<Chunk(const RowMatrixF& hidden,
                              const std::vector<int>& lengths, size_t chunk)>
          compute,
      absl::FunctionRef<absl::Status(Chunk& chunk, int64_t shard)> consume)
      const;
  // The same over several sources of one layout, read chunk by chunk side
  // by side: compute gets each source's rows of the chunk.
  template <typename Chunk>
  absl::Status ForEachChunkOf(
      const std::vector<const HiddenStateSource*>& sources,
      const std::string& before,
      absl::FunctionRef<Chunk(const std::vector<RowMatrixF>& inputs,
                              const std::vector<int>& lengths)>
          compute,
      absl::FunctionRef<absl::Status(Chunk& chunk, int64_t shard)> consume)
      const;
  // Sequential propagation with the stash: "" to keep it in memory, a
  // directory for files, nullopt to recompute each group's input instead.
  std::optional<std::string> StashPlace() const;
  // Group `g` of a sequential block on one split: its statistics, and what
  // later groups reuse kept in `stash` (files named after `split`).
  absl::Status StashedStage(size_t g, const HiddenStateSource& source,
                            bool calibration, const std::string& split,
                            GroupPlan& plan, SplitStash* stash);
  // The block's output on one split from the stash, into `sink`.
  absl::Status WriteLeavingFromStash(SplitStash* stash,
                                     HiddenStateSink* sink) const;
  absl::StatusOr<std::unique_ptr<KeptActivation>> Keep(
      const HiddenStateSource& layout, int64_t width, const std::string& split,
      const std::string& what) const;
  // Sequential propagation: each group's statistics from its inputs
  // computed with the groups before it quantized, chunk by chunk.
  absl::Status Accumulate(const HiddenStateSource& source, bool calibration,
                          GroupPlan& plan) const;
  // Independent propagation: one forward pass per chunk gives every
  // group's statistics and the leaving states (the unquantized block's).
  absl::Status AccumulateAll(const HiddenStateSource& source, bool calibration,
                             std::vector<GroupPlan>& plans,
                             HiddenStateSink* sink) const;
  // Quantizes the group's layers from its statistics; reads only the
  // plan and the input weights, so groups can run side by side.
  absl::StatusOr<QuantizedGroup> QuantizeLayers(GroupPlan& plan) const;
  // Applies a group's result: packs, records, folds AWQ scales into the
  // producing op (which may belong to an earlier group).
  absl::Status ApplyGroup(GroupPlan& plan, QuantizedGroup quantized);
  // A round's Accumulate and WriteShard through round_stash_.
  absl::Status AccumulateStashed(const HiddenStateSource& source,
                                 bool calibration, GroupPlan& plan) const;
  absl::Status WriteStashedShard(HiddenStateSink* sink) const;
  // The residual stream of `chunk` of a round's shard entering as `hidden`,
  // from the stash when `use` says what it holds is current.
  enum class StashUse { kNone, kContext, kResidual };
  StashUse UsableStash(size_t chunks) const;
  RowMatrixF ShardResidual(StashUse use, const RowMatrixF& hidden, int seq_len,
                           size_t chunk) const;
  // The block's output on one split, chunk by chunk into `sink`.
  absl::Status WriteLeavingStates(const HiddenStateSource& source,
                                  HiddenStateSink* sink) const;
  absl::Status FoldAwqScales(InputGroup group,
                             const std::vector<LayerType>& types,
                             const Eigen::VectorXf& s);
  // Divides output row c of `type` by s[c], in its scales when quantized.
  absl::Status DivideProducerRows(LayerType type, const Eigen::VectorXf& s,
                                  const std::string& consumer);
  // Multiplies column k of an unquantized consumer's weight by s[k].
  void ScaleUnquantizedColumns(LayerType type, const Eigen::VectorXf& s);
  Eigen::VectorXf DivideNorm(const Eigen::VectorXf& norm,
                             const Eigen::VectorXf& s,
                             const std::string& tensor) const;
  absl::StatusOr<std::vector<PackedTensor>> BlockTensors() const;

  const BlockTaskInput& input_;
  ThreadPool* pool_;
  // Where the stash lives ("" memory); set for sequential runs that keep it.
  std::string stash_dir_;
  // Ops an AWQ fold changed after their outputs may have been kept.
  std::set<std::string> folded_ops_;
  const ModelConfig& config_;
  const Recipe& recipe_;
  const LayerProgress& progress_;
  MemoryHiddenStateSource memory_calibration_;
  MemoryHiddenStateSource memory_heldout_;
  const HiddenStateSource* calibration_;
  const HiddenStateSource* heldout_;
  RopeTable rope_;
  BlockWeights working_;
  std::vector<LinearLayerSpec> specs_;
  std::vector<LayerResult> results_;
  int groups_done_ = 0;                     // Rounds only.
  ShardRoundStash* round_stash_ = nullptr;  // Rounds only; may be null.
};

const LayerResult* BlockRunner::Result(LayerType type) const {
  for (const LayerResult& r : results_) {
    if (r.type == type && r.expert < 0) return &r;
  }
  return nullptr;
}

const LinearWeights& BlockRunner::WorkingLinear(const LayerResult& r) const {
  if (r.expert < 0) return working_.Linear(r.type);
  return working_.moe->experts[r.expert].Part(r.type);
}

absl::StatusOr<RowMatrixF> BlockRunner::MlpInputRows(
    const HiddenStateSource& source) const {
  const int seq_len = source.seq_len();
  int64_t total = 0;
  for (int length : source.lengths()) total += length;
  RowMatrixF rows(total, config_.hidden_size);
  int64_t at = 0;
  QUANT_RETURN_IF_ERROR(ForEachChunk<RowMatrixF>(
      source, "the experts",
      [&](const RowMatrixF& hidden, const std::vector<int>& lengths) {
        return RealRows(GroupInput(InputGroup::kMlpIn, hidden, seq_len),
                        seq_len, lengths);
      },
      [&](RowMatrixF& chunk, int64_t) -> absl::Status {
        rows.middleRows(at, chunk.rows()) = chunk;
        at += chunk.rows();
        return absl::OkStatus();
      }));
  return rows;
}

absl::Status BlockRunner::QuantizeMoe(BlockTaskOutput* output) {
  QUANT_RETURN_IF_ERROR(CheckCancelled("the experts"));
  QUANT_ASSIGN_OR_RETURN(const RowMatrixF calibration,
                         MlpInputRows(*calibration_));
  QUANT_ASSIGN_OR_RETURN(const RowMatrixF heldout, MlpInputRows(*heldout_));
  ExpertQuantizeInput in;
  in.config = &config_;
  in.recipe = &recipe_;
  in.block = input_.weights.block;
  in.weights = &*input_.weights.moe;
  in.settings = input_.expert_settings;
  in.policy = input_.expert_policy;
  in.calibration_rows = &calibration;
  in.heldout_rows = &heldout;
  in.pool = pool_;
  QUANT_ASSIGN_OR_RETURN(ExpertQuantization experts, QuantizeExperts(in));
  working_.moe = std::move(experts.effective);
  for (LayerResult& layer : experts.layers) {
    if (layer.quantized) {
      // What the format cannot hold (a zero point GPTQ v1 cannot store)
      // keeps the layer as the source has it, as for the other layers.
      absl::StatusOr<std::vector<PackedTensor>> trial =
          PackLayer(layer.layer, layer.name, recipe_, config_);
      if (!trial.ok()) {
        if (trial.status().code() != absl::StatusCode::kFailedPrecondition) {
          return trial.status();
        }
        layer.quantized = false;
        layer.reason = std::string(trial.status().message());
        working_.moe->experts[layer.expert].Part(layer.type).weight =
            input_.weights.moe->experts[layer.expert].Part(layer.type).weight;
      }
    }
    if (progress_) progress_(layer);
    results_.push_back(std::move(layer));
  }
  output->routed_calibration_tokens =
      std::move(experts.routed_calibration_tokens);
  output->routed_heldout_tokens = std::move(experts.routed_heldout_tokens);
  output->starved_experts = std::move(experts.starved_experts);
  return absl::OkStatus();
}

absl::Status BlockRunner::PlanLayers() {
  specs_ = ListLinearLayers(config_, input_.weights.block);
  for (const LinearLayerSpec& spec : specs_) {
    auto it = input_.settings.find(spec.type);
    if (it == input_.settings.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("block task: no settings for ", spec.name));
    }
    if (!input_.weights.linear.count(spec.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("block task: no weights for ", spec.name));
    }
    LayerResult result;
    result.name = spec.name;
    result.type = spec.type;
    result.input_group = spec.input_group;
    result.settings = it->second;
    if (result.settings.keep_unquantized) {
      result.reason = result.settings.reason;
    } else {
      const std::string refusal =
          FormatRefusal(recipe_.format, spec.out_features, spec.in_features,
                        result.settings.bits, result.settings.group_size);
      if (!refusal.empty()) {
        result.reason =
            absl::StrCat("format ", OutputFormatName(recipe_.format),
                         " cannot hold it: ", refusal);
      }
    }
    results_.push_back(std::move(result));
  }
  return absl::OkStatus();
}

Eigen::VectorXf BlockRunner::DivideNorm(const Eigen::VectorXf& norm,
                                        const Eigen::VectorXf& s,
                                        const std::string& tensor) const {
  const DType dtype = StoredDType(tensor);
  Eigen::VectorXf out = norm.cwiseQuotient(s);
  for (Eigen::Index i = 0; i < out.size(); ++i) {
    out[i] = RoundTripThrough(out[i], dtype);
  }
  return out;
}

absl::Status BlockRunner::DivideProducerRows(LayerType type,
                                             const Eigen::VectorXf& s,
                                             const std::string& consumer) {
  LayerResult* producer = Result(type);
  LinearWeights& linear = working_.linear[type];
  if (linear.weight.rows() != s.size()) {
    return absl::InternalError(absl::StrCat(
        "AWQ fold of ", consumer, " into ", producer->name, ": ", s.size(),
        " input scales for ", linear.weight.rows(), " rows"));
  }
  producer->absorbed_awq_scales_of = consumer;
  const DType bias_dtype = StoredDType(producer->name + ".bias");
  if (linear.bias.size() > 0) {
    for (Eigen::Index c = 0; c < s.size(); ++c) {
      linear.bias[c] = RoundTripThrough(linear.bias[c] / s[c], bias_dtype);
    }
  }
  if (!producer->quantized) {
    const DType dtype = StoredDType(producer->name + ".weight");
    for (Eigen::Index c = 0; c < s.size(); ++c) {
      for (Eigen::Index k = 0; k < linear.weight.cols(); ++k) {
        linear.weight(c, k) =
            RoundTripThrough(linear.weight(c, k) / s[c], dtype);
      }
    }
    return absl::OkStatus();
  }
  QuantizedLayer& layer = producer->layer;
  for (Eigen::Index c = 0; c < s.size(); ++c) {
    for (Eigen::Index g = 0; g < layer.scales.rows(); ++g) {
      layer.scales(g, c) =
          RoundTripThrough(layer.scales(g, c) / s[c], DType::kF16);
    }
    for (int64_t k = 0; k < layer.cols; ++k) {
      const int g = layer.g_idx[k];
      layer.dequantized(c, k) =
          layer.scales(g, c) *
          (static_cast<float>(layer.codes(c, k)) - layer.zeros(g, c));
    }
  }
  linear.weight = layer.dequantized;
  return absl::OkStatus();
}

void BlockRunner::ScaleUnquantizedColumns(LayerType type,
                                          const Eigen::VectorXf& s) {
  LayerResult* result = Result(type);
  LinearWeights& linear = working_.linear[type];
  const DType dtype = StoredDType(result->name + ".weight");
  for (Eigen::Index r = 0; r < linear.weight.rows(); ++r) {
    for (Eigen::Index k = 0; k < linear.weight.cols(); ++k) {
      linear.weight(r, k) = RoundTripThrough(
          input_.weights.Linear(type).weight(r, k) * s[k], dtype);
    }
  }
}

absl::Status BlockRunner::FoldAwqScales(InputGroup group,
                                        const std::vector<LayerType>& types,
                                        const Eigen::VectorXf& s) {
  const std::string prefix = BlockPrefix(input_.weights.block);
  std::string fold;
  switch (group) {
    case InputGroup::kAttnIn:
      fold = "input_layernorm";
      working_.input_norm =
          DivideNorm(working_.input_norm, s, prefix + "input_layernorm.weight");
      break;
    case InputGroup::kMlpIn:
      fold = "post_attention_layernorm";
      working_.post_attention_norm =
          DivideNorm(working_.post_attention_norm, s,
                     prefix + "post_attention_layernorm.weight");
      break;
    case InputGroup::kAttnOut:
      fold = "v_proj";
      folded_ops_.insert(fold);
      QUANT_RETURN_IF_ERROR(DivideProducerRows(LayerType::kVProj, s, "o_proj"));
      break;
    case InputGroup::kMlpOut:
      fold = "up_proj";
      folded_ops_.insert(fold);
      QUANT_RETURN_IF_ERROR(
          DivideProducerRows(LayerType::kUpProj, s, "down_proj"));
      break;
  }
  for (const LayerType type : types) {
    LayerResult* result = Result(type);
    if (result->quantized && result->choices.awq_alpha.has_value()) {
      result->awq_fold = fold;
    } else if (!result->quantized) {
      // Its input is now x / s as well: W·diag(s) keeps its output.
      ScaleUnquantizedColumns(type, s);
      result->awq_fold = absl::StrCat("shares the input scaled into ", fold,
                                      "; weight kept as W·diag(s)");
    }
  }
  return absl::OkStatus();
}

absl::Status BlockRunner::CheckCancelled(const std::string& before) const {
  if (input_.cancelled != nullptr && input_.cancelled->load()) {
    return absl::CancelledError(absl::StrCat("block ", input_.weights.block,
                                             " cancelled before ", before));
  }
  return absl::OkStatus();
}

BlockRunner::GroupPlan BlockRunner::PlanGroup(
    const std::vector<LayerType>& types, bool with_statistics) const {
  GroupPlan plan;
  plan.types = types;
  plan.group = Result(types[0])->input_group;
  for (const LayerType type : types) {
    const LayerResult* result = Result(type);
    if (!result->reason.empty()) continue;
    const auto previous = input_.previous.find(type);
    plan.layers.push_back(
        {result->name, result->settings,
         ConstRowMatrixRef(input_.weights.Linear(type).weight),
         previous == input_.previous.end() ? nullptr : &previous->second});
    plan.quantized_types.push_back(type);
  }
  plan.options.recipe = &recipe_;
  plan.options.pool = pool_;
  plan.options.awq_fold_available =
      plan.group != InputGroup::kAttnOut ||
      config_.num_key_value_heads == config_.num_attention_heads;
  if (with_statistics && !plan.layers.empty()) {
    plan.statistics.emplace(plan.layers[0].weight.cols(), plan.layers,
                            plan.options);
  }
  return plan;
}

absl::Status BlockRunner::AddRows(GroupPlan& plan, const RowMatrixF& rows,
                                  bool calibration, int64_t shard) {
  if (!plan.statistics.has_value()) return absl::OkStatus();
  return calibration ? plan.statistics->AddCalibration(rows, shard)
                     : plan.statistics->AddHeldout(rows, shard);
}

RowMatrixF BlockRunner::GroupInput(InputGroup group, const RowMatrixF& hidden,
                                   int seq_len) const {
  const BlockWeights& w = Source();
  RowMatrixF attention_input = AttentionInput(config_, w, hidden);
  if (group == InputGroup::kAttnIn) return attention_input;
  RowMatrixF context =
      AttentionContext(config_, w, rope_, seq_len, attention_input);
  if (group == InputGroup::kAttnOut) return context;
  const RowMatrixF residual = AttentionResidual(w, hidden, context);
  RowMatrixF mlp_input = MlpInput(config_, w, residual);
  if (group == InputGroup::kMlpIn) return mlp_input;
  return MlpHidden(w, mlp_input);
}

namespace {

std::vector<int> ChunkLengths(const std::vector<int>& lengths,
                              SequenceRange chunk) {
  return std::vector<int>(lengths.begin() + chunk.first,
                          lengths.begin() + chunk.first + chunk.count);
}

}  // namespace

template <typename Chunk>
absl::Status BlockRunner::ForEachIndexedChunk(
    const HiddenStateSource& source, const std::string& before,
    absl::FunctionRef<Chunk(const RowMatrixF& hidden,
                            const std::vector<int>& lengths, size_t chunk)>
        compute,
    absl::FunctionRef<absl::Status(Chunk& chunk, int64_t shard)> consume)
    const {
  const std::vector<SequenceRange> chunks =
      PlanChunks(source.sequences(), source.seq_len(), input_.chunk_tokens);
  const size_t in_flight =
      static_cast<size_t>(pool_ == nullptr ? 1 : pool_->threads());
  for (size_t start = 0; start < chunks.size(); start += in_flight) {
    QUANT_RETURN_IF_ERROR(CheckCancelled(before));
    const size_t count = std::min(in_flight, chunks.size() - start);
    std::vector<RowMatrixF> hidden(count);
    std::vector<std::vector<int>> lengths(count);
    for (size_t i = 0; i < count; ++i) {
      QUANT_ASSIGN_OR_RETURN(hidden[i], source.Read(chunks[start + i]));
      lengths[i] = ChunkLengths(source.lengths(), chunks[start + i]);
    }
    std::vector<Chunk> results(count);
    ParallelFor(pool_, static_cast<int64_t>(count), [&](int64_t i) {
      results[i] = compute(hidden[i], lengths[i], start + i);
      hidden[i] = RowMatrixF();
    });
    for (size_t i = 0; i < count; ++i) {
      QUANT_RETURN_IF_ERROR(consume(results[i], ShardOf(chunks[start + i])));
      results[i] = Chunk();
    }
  }
  return absl::OkStatus();
}

template <typename Chunk>
absl::Status BlockRunner::ForEachChunkOf(
    const std::vector<const HiddenStateSource*>& sources,
    const std::string& before,
    absl::FunctionRef<Chunk(const std::vector<RowMatrixF>& inputs,
                            const std::vector<int>& lengths)>
        compute,
    absl::FunctionRef<absl::Status(Chunk& chunk, int64_t shard)> consume)
    const {
  const HiddenStateSource& layout = *sources.front();
  const std::vector<SequenceRange> chunks =
      PlanChunks(layout.sequences(), layout.seq_len(), input_.chunk_tokens);
  const size_t in_flight =
      static_cast<size_t>(pool_ == nullptr ? 1 : pool_->threads());
  for (size_t start = 0; start < chunks.size(); start += in_flight) {
    QUANT_RETURN_IF_ERROR(CheckCancelled(before));
    const size_t count = std::min(in_flight, chunks.size() - start);
    std::vector<std::vector<RowMatrixF>> inputs(count);
    std::vector<std::vector<int>> lengths(count);
    for (size_t i = 0; i < count; ++i) {
      for (const HiddenStateSource* source : sources) {
        QUANT_ASSIGN_OR_RETURN(RowMatrixF rows,
                               source->Read(chunks[start + i]));
        inputs[i].push_back(std::move(rows));
      }
      lengths[i] = ChunkLengths(layout.lengths(), chunks[start + i]);
    }
    std::vector<Chunk> results(count);
    ParallelFor(pool_, static_cast<int64_t>(count), [&](int64_t i) {
      results[i] = compute(inputs[i], lengths[i]);
      inputs[i].clear();
    });
    for (size_t i = 0; i < count; ++i) {
      QUANT_RETURN_IF_ERROR(consume(results[i], ShardOf(chunks[start + i])));
      results[i] = Chunk();
    }
  }
  return absl::OkStatus();
}

std::optional<std::string> BlockRunner::StashPlace() const {
  const int64_t rows = (calibration_->sequences() * calibration_->seq_len()) +
                       (heldout_->sequences() * heldout_->seq_len());
  if (BlockStashBytes(config_, rows) <= input_.max_stash_bytes) return "";
  if (!input_.stash_dir.empty()) return input_.stash_dir;
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<KeptActivation>> BlockRunner::Keep(
    const HiddenStateSource& layout, int64_t width, const std::string& split,
    const std::string& what) const {
  std::string path;
  if (!stash_dir_.empty()) {
    path = JoinPath(stash_dir_,
                    absl::StrCat("stash-block-", input_.weights.block, ".",
                                 split, ".", what, ".safetensors"));
  }
  return KeptActivation::Create(layout, width, std::move(path),
                                input_.file_system);
}

// The stashed stages. Each computes exactly what GroupInput would for its
// group (same functions, same weights, same chunks), so the bytes are
// those of recomputing.
absl::Status BlockRunner::StashedStage(size_t g,
                                       const HiddenStateSource& source,
                                       bool calibration,
                                       const std::string& split,
                                       GroupPlan& plan, SplitStash* stash) {
  const BlockWeights& w = Source();
  const int seq_len = source.seq_len();
  const bool observe = plan.statistics.has_value();
  // A chunk's statistics rows (real tokens of the group's input) and the
  // activation kept for later groups.
  struct Chunk {
    RowMatrixF rows;
    RowMatrixF kept;
  };
  auto add = [&](Chunk& chunk, int64_t shard,
                 KeptActivation* keep) -> absl::Status {
    if (observe) {
      QUANT_RETURN_IF_ERROR(AddRows(plan, chunk.rows, calibration, shard));
    }
    return keep == nullptr ? absl::OkStatus() : keep->Append(chunk.kept);
  };
  const std::string before = std::string(LayerTypeName(plan.types.front()));
  switch (g) {
    case 0:  // [q,k,v]: the normalised input; nothing to keep.
      if (!observe) return absl::OkStatus();
      return ForEachChunkOf<Chunk>(
          {&source}, before,
          [&](const std::vector<RowMatrixF>& in, const std::vector<int>& len) {
            return Chunk{
                RealRows(AttentionInput(config_, w, in[0]), seq_len, len), {}};
          },
          [&](Chunk& c, int64_t shard) { return add(c, shard, nullptr); });
    case 1: {  // o: the attention context, kept.
      QUANT_ASSIGN_OR_RETURN(stash->context,
                             Keep(source, config_.q_size(), split, "context"));
      QUANT_RETURN_IF_ERROR(ForEachChunkOf<Chunk>(
          {&source}, before,
          [&](const std::vector<RowMatrixF>& in, const std::vector<int>& len) {
            Chunk c;
            c.kept = AttentionContext(config_, w, rope_, seq_len,
                                      AttentionInput(config_, w, in[0]));
            if (observe) c.rows = RealRows(c.kept, seq_len, len);
            return c;
          },
          [&](Chunk& c, int64_t shard) {
            return add(c, shard, stash->context.get());
          }));
      return stash->context->Finish();
    }
    case 2: {  // [gate,up]: the residual stream, kept; the context dropped.
      // o_proj's AWQ fold changed v_proj: the kept context is stale.
      const bool fresh = folded_ops_.count("v_proj") == 0;
      std::vector<const HiddenStateSource*> inputs = {&source};
      if (fresh) inputs.push_back(&stash->context->source());
      QUANT_ASSIGN_OR_RETURN(stash->residual, Keep(source, config_.hidden_size,
                                                   split, "residual"));
      QUANT_RETURN_IF_ERROR(ForEachChunkOf<Chunk>(
          inputs, before,
          [&](const std::vector<RowMatrixF>& in, const std::vector<int>& len) {
            Chunk c;
            c.kept =
                fresh
                    ? AttentionResidual(w, in[0], in[1])
                    : AttentionResidual(
                          w, in[0],
                          AttentionContext(config_, w, rope_, seq_len,
                                           AttentionInput(config_, w, in[0])));
            if (observe) {
              c.rows = RealRows(MlpInput(config_, w, c.kept), seq_len, len);
            }
            return c;
          },
          [&](Chunk& c, int64_t shard) {
            return add(c, shard, stash->residual.get());
          }));
      stash->context.reset();
      return stash->residual->Finish();
    }
    case 3: {  // down: the MLP's hidden state, kept.
      QUANT_ASSIGN_OR_RETURN(
          stash->mlp_hidden,
          Keep(source, config_.intermediate_size, split, "mlp_hidden"));
      QUANT_RETURN_IF_ERROR(ForEachChunkOf<Chunk>(
          {&stash->residual->source()}, before,
          [&](const std::vector<RowMatrixF>& in, const std::vector<int>& len) {
            Chunk c;
            c.kept = MlpHidden(w, MlpInput(config_, w, in[0]));
            if (observe) c.rows = RealRows(c.kept, seq_len, len);
            return c;
          },
          [&](Chunk& c, int64_t shard) {
            return add(c, shard, stash->mlp_hidden.get());
          }));
      return stash->mlp_hidden->Finish();
    }
  }
  return absl::InternalError(absl::StrCat("no layer group ", g));
}

absl::Status BlockRunner::WriteLeavingFromStash(SplitStash* stash,
                                                HiddenStateSink* sink) const {
  const BlockWeights& w = Source();
  // down_proj's AWQ fold changed up_proj: the kept MLP state is stale.
  const bool fresh = folded_ops_.count("up_proj") == 0;
  std::vector<const HiddenStateSource*> inputs = {&stash->residual->source()};
  if (fresh) inputs.push_back(&stash->mlp_hidden->source());
  QUANT_RETURN_IF_ERROR(ForEachChunkOf<RowMatrixF>(
      inputs, "writing the block's output",
      [&](const std::vector<RowMatrixF>& in, const std::vector<int>&) {
        return fresh ? MlpResidual(w, in[0], in[1])
                     : MlpResidual(w, in[0],
                                   MlpHidden(w, MlpInput(config_, w, in[0])));
      },
      [&](RowMatrixF& output, int64_t) { return sink->Append(output); }));
  stash->residual.reset();
  stash->mlp_hidden.reset();
  return sink->Finish();
}

absl::Status BlockRunner::Accumulate(const HiddenStateSource& source,
                                     bool calibration, GroupPlan& plan) const {
  if (!plan.statistics.has_value()) return absl::OkStatus();
  const int seq_len = source.seq_len();
  return ForEachChunk<RowMatrixF>(
      source, std::string(LayerTypeName(plan.types.front())),
      [&](const RowMatrixF& hidden, const std::vector<int>& lengths) {
        return RealRows(GroupInput(plan.group, hidden, seq_len), seq_len,
                        lengths);
      },
      [&](RowMatrixF& rows, int64_t shard) {
        return AddRows(plan, rows, calibration, shard);
      });
}

namespace {

uint64_t HashFloats(uint64_t seed, const float* data, int64_t count) {
  return absl::HashOf(
      seed, absl::string_view(reinterpret_cast<const char*>(data),
                              static_cast<size_t>(count) * sizeof(float)));
}

// A fingerprint of the weights the attention context is computed with (the
// input norm, q, k, v and qwen3's q/k norms), and with `with_o` of those
// the residual stream is: a stash entry is current when it matches. A
// 64-bit hash, seeded per process like the stash it guards.
uint64_t AttentionWeightsFingerprint(const BlockWeights& w, bool with_o) {
  uint64_t h = 0;
  for (const Eigen::VectorXf* norm : {&w.input_norm, &w.q_norm, &w.k_norm}) {
    h = HashFloats(h, norm->data(), norm->size());
  }
  std::vector<LayerType> types = {LayerType::kQProj, LayerType::kKProj,
                                  LayerType::kVProj};
  if (with_o) types.push_back(LayerType::kOProj);
  for (LayerType type : types) {
    const auto it = w.linear.find(type);
    if (it == w.linear.end()) continue;
    h = HashFloats(h, it->second.weight.data(), it->second.weight.size());
    h = HashFloats(h, it->second.bias.data(), it->second.bias.size());
  }
  return h;
}

}  // namespace

BlockRunner::StashUse BlockRunner::UsableStash(size_t chunks) const {
  if (round_stash_ == nullptr) return StashUse::kNone;
  const BlockWeights& w = Source();
  if (round_stash_->residual.size() == chunks &&
      round_stash_->residual_weights == AttentionWeightsFingerprint(w, true)) {
    return StashUse::kResidual;
  }
  if (round_stash_->context.size() == chunks &&
      round_stash_->context_weights == AttentionWeightsFingerprint(w, false)) {
    return StashUse::kContext;
  }
  return StashUse::kNone;
}

RowMatrixF BlockRunner::ShardResidual(StashUse use, const RowMatrixF& hidden,
                                      int seq_len, size_t chunk) const {
  const BlockWeights& w = Source();
  if (use == StashUse::kResidual) return round_stash_->residual[chunk];
  if (use == StashUse::kContext) {
    return AttentionResidual(w, hidden, round_stash_->context[chunk]);
  }
  // The same ops as GroupInput and RunBlock, so the same bytes.
  const RowMatrixF attention_input = AttentionInput(config_, w, hidden);
  const RowMatrixF context =
      AttentionContext(config_, w, rope_, seq_len, attention_input);
  return AttentionResidual(w, hidden, context);
}

absl::Status BlockRunner::AccumulateStashed(const HiddenStateSource& source,
                                            bool calibration,
                                            GroupPlan& plan) const {
  if (!plan.statistics.has_value()) return absl::OkStatus();
  ShardRoundStash& stash = *round_stash_;
  const BlockWeights& w = Source();
  const int seq_len = source.seq_len();
  const size_t chunks =
      PlanChunks(source.sequences(), seq_len, input_.chunk_tokens).size();
  const StashUse use = UsableStash(chunks);
  const InputGroup group = plan.group;
  const bool keeps_context = group == InputGroup::kAttnOut;
  const bool keeps_residual =
      group == InputGroup::kMlpIn || group == InputGroup::kMlpOut;
  std::vector<RowMatrixF> kept(keeps_context || keeps_residual ? chunks : 0);
  const absl::Status status = ForEachIndexedChunk<RowMatrixF>(
      source, std::string(LayerTypeName(plan.types.front())),
      [&](const RowMatrixF& hidden, const std::vector<int>& lengths,
          size_t chunk) {
        RowMatrixF input;
        if (group == InputGroup::kAttnIn) {
          input = AttentionInput(config_, w, hidden);
        } else if (group == InputGroup::kAttnOut) {
          const RowMatrixF attention_input = AttentionInput(config_, w, hidden);
          input = AttentionContext(config_, w, rope_, seq_len, attention_input);
          kept[chunk] = input;
        } else {
          RowMatrixF residual = ShardResidual(use, hidden, seq_len, chunk);
          input = MlpInput(config_, w, residual);
          if (group == InputGroup::kMlpOut) input = MlpHidden(w, input);
          kept[chunk] = std::move(residual);
        }
        return RealRows(input, seq_len, lengths);
      },
      [&](RowMatrixF& rows, int64_t shard) {
        return AddRows(plan, rows, calibration, shard);
      });
  if (!status.ok()) {
    stash = ShardRoundStash();  // Half a round kept is nothing kept.
    return status;
  }
  if (use != StashUse::kNone) ++stash.rounds_continued;
  if (keeps_context) {
    stash.context = std::move(kept);
    stash.context_weights = AttentionWeightsFingerprint(w, false);
    stash.residual.clear();
  } else if (keeps_residual) {
    stash.residual = std::move(kept);
    stash.residual_weights = AttentionWeightsFingerprint(w, true);
    stash.context.clear();
  }
  return absl::OkStatus();
}

absl::Status BlockRunner::WriteStashedShard(HiddenStateSink* sink) const {
  const HiddenStateSource& source = *calibration_;
  const BlockWeights& w = Source();
  const int seq_len = source.seq_len();
  const StashUse use = UsableStash(
      PlanChunks(source.sequences(), seq_len, input_.chunk_tokens).size());
  const absl::Status status = ForEachIndexedChunk<RowMatrixF>(
      source, "writing the block's output",
      [&](const RowMatrixF& hidden, const std::vector<int>&, size_t chunk) {
        const RowMatrixF residual = ShardResidual(use, hidden, seq_len, chunk);
        const RowMatrixF mlp_input = MlpInput(config_, w, residual);
        const RowMatrixF mlp_hidden = MlpHidden(w, mlp_input);
        return MlpResidual(w, residual, mlp_hidden);
      },
      [&](RowMatrixF& output, int64_t) { return sink->Append(output); });
  if (status.ok() && use != StashUse::kNone) ++round_stash_->rounds_continued;
  // The block's last round: nothing of it is needed again.
  round_stash_->context.clear();
  round_stash_->residual.clear();
  QUANT_RETURN_IF_ERROR(status);
  return sink->Finish();
}

absl::Status BlockRunner::AccumulateAll(const HiddenStateSource& source,
                                        bool calibration,
                                        std::vector<GroupPlan>& plans,
                                        HiddenStateSink* sink) const {
  const BlockWeights& w = Source();
  const int seq_len = source.seq_len();
  // Each group's real-token input rows (empty for a group that quantizes
  // nothing) and the block's output, for one chunk.
  struct ChunkActivations {
    std::vector<RowMatrixF> group_rows;
    RowMatrixF output;
  };
  QUANT_RETURN_IF_ERROR(ForEachChunk<ChunkActivations>(
      source, std::string(LayerTypeName(plans.front().types.front())),
      [&](const RowMatrixF& hidden, const std::vector<int>& lengths) {
        ChunkActivations out;
        out.group_rows.resize(plans.size());
        auto observe = [&](size_t group, const RowMatrixF& input) {
          if (plans[group].statistics.has_value()) {
            out.group_rows[group] = RealRows(input, seq_len, lengths);
          }
        };
        // RunBlock's stages, each group's input observed on the way.
        const RowMatrixF attention_input = AttentionInput(config_, w, hidden);
        observe(0, attention_input);
        const RowMatrixF context =
            AttentionContext(config_, w, rope_, seq_len, attention_input);
        observe(1, context);
        const RowMatrixF residual = AttentionResidual(w, hidden, context);
        const RowMatrixF mlp_input = MlpInput(config_, w, residual);
        observe(2, mlp_input);
        const RowMatrixF mlp_hidden = MlpHidden(w, mlp_input);
        observe(3, mlp_hidden);
        out.output = MlpResidual(w, residual, mlp_hidden);
        return out;
      },
      [&](ChunkActivations& chunk, int64_t shard) -> absl::Status {
        for (size_t g = 0; g < plans.size(); ++g) {
          QUANT_RETURN_IF_ERROR(
              AddRows(plans[g], chunk.group_rows[g], calibration, shard));
        }
        return sink->Append(chunk.output);
      }));
  return sink->Finish();
}

absl::StatusOr<QuantizedGroup> BlockRunner::QuantizeLayers(
    GroupPlan& plan) const {
  QUANT_RETURN_IF_ERROR(
      CheckCancelled(std::string(LayerTypeName(plan.types.front()))));
  if (!plan.statistics.has_value()) return QuantizedGroup();
  QUANT_RETURN_IF_ERROR(plan.statistics->CloseShards());
  return QuantizeLayerGroup(plan.layers, *plan.statistics, plan.options);
}

absl::Status BlockRunner::ApplyGroup(GroupPlan& plan,
                                     QuantizedGroup quantized) {
  const std::vector<LayerType>& types = plan.types;
  const std::vector<LayerType>& quantized_types = plan.quantized_types;
  const InputGroup group = plan.group;
  const GroupQuantizeOptions& options = plan.options;
  for (size_t i = 0; i < quantized_types.size(); ++i) {
    LayerResult* result = Result(quantized_types[i]);
    QuantizedGroupLayer& q = quantized.layers[i];
    // What the format cannot hold is found now, before later groups are
    // calibrated on this layer's output.
    absl::StatusOr<std::vector<PackedTensor>> trial =
        PackLayer(q.layer, result->name, recipe_, config_);
    if (!trial.ok()) {
      if (trial.status().code() != absl::StatusCode::kFailedPrecondition) {
        return trial.status();
      }
      result->reason = std::string(trial.status().message());
      continue;
    }
    result->quantized = true;
    result->layer = std::move(q.layer);
    result->audit = std::move(q.audit);
    result->choices = std::move(q.choices);
    working_.linear[quantized_types[i]].weight = result->layer.dequantized;
  }
  if (quantized.awq_input_scales.size() > 0 && options.awq_fold_available) {
    QUANT_RETURN_IF_ERROR(
        FoldAwqScales(group, types, quantized.awq_input_scales));
  } else if (quantized.awq_input_scales.size() > 0) {
    // α = 0 only: s is all ones and there is nothing to fold.
    for (const LayerType type : types) {
      LayerResult* result = Result(type);
      if (result->choices.awq_alpha.has_value()) {
        result->awq_fold =
            "none: grouped-query attention shares value heads, so o_proj "
            "was searched at alpha 0 only";
      }
    }
  }
  if (progress_) {
    for (const LayerType type : types) progress_(*Result(type));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PackedTensor>> BlockRunner::BlockTensors() const {
  const std::string prefix = BlockPrefix(input_.weights.block);
  std::vector<PackedTensor> tensors;
  auto add_vector = [&](const std::string& name,
                        const Eigen::VectorXf& v) -> absl::Status {
    QUANT_ASSIGN_OR_RETURN(
        PackedTensor t,
        FloatTensorAs(name, {v.size()},
                      std::vector<float>(v.data(), v.data() + v.size()),
                      StoredDType(name)));
    tensors.push_back(std::move(t));
    return absl::OkStatus();
  };
  QUANT_RETURN_IF_ERROR(
      add_vector(prefix + "input_layernorm.weight", working_.input_norm));
  QUANT_RETURN_IF_ERROR(add_vector(prefix + "post_attention_layernorm.weight",
                                   working_.post_attention_norm));
  if (config_.qk_norm) {
    QUANT_RETURN_IF_ERROR(
        add_vector(prefix + "self_attn.q_norm.weight", working_.q_norm));
    QUANT_RETURN_IF_ERROR(
        add_vector(prefix + "self_attn.k_norm.weight", working_.k_norm));
  }
  if (working_.moe.has_value()) {
    // The router stays as the source stores it.
    const RowMatrixF& router = working_.moe->router;
    const std::string name =
        RouterName(config_, input_.weights.block) + ".weight";
    QUANT_ASSIGN_OR_RETURN(
        PackedTensor t,
        FloatTensorAs(
            name, {router.rows(), router.cols()},
            std::vector<float>(router.data(), router.data() + router.size()),
            StoredDType(name)));
    tensors.push_back(std::move(t));
  }
  for (const LayerResult& result : results_) {
    const LinearWeights& linear = WorkingLinear(result);
    if (result.quantized) {
      QUANT_ASSIGN_OR_RETURN(
          std::vector<PackedTensor> packed,
          PackLayer(result.layer, result.name, recipe_, config_));
      for (PackedTensor& t : packed) tensors.push_back(std::move(t));
    } else {
      const RowMatrixF& w = linear.weight;
      QUANT_ASSIGN_OR_RETURN(
          PackedTensor t,
          FloatTensorAs(result.name + ".weight", {w.rows(), w.cols()},
                        std::vector<float>(w.data(), w.data() + w.size()),
                        StoredDType(result.name + ".weight")));
      tensors.push_back(std::move(t));
    }
    if (linear.bias.size() > 0) {
      QUANT_RETURN_IF_ERROR(add_vector(result.name + ".bias", linear.bias));
    }
  }
  return tensors;
}

absl::Status CheckHidden(const char* what, const HiddenStateSource& h,
                         int64_t hidden_size) {
  if (h.seq_len() <= 0 || h.sequences() == 0 ||
      h.hidden_size() != hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block task: ", what, " hidden states are ", h.sequences(),
        " sequences of ", h.seq_len(), " tokens of width ", h.hidden_size(),
        "; the model's hidden size is ", hidden_size));
  }
  for (int length : h.lengths()) {
    if (length < 0 || length > h.seq_len()) {
      return absl::InvalidArgumentError(
          absl::StrCat("block task: ", what, " sequence length ", length,
                       " outside [0, ", h.seq_len(), "]"));
    }
  }
  return absl::OkStatus();
}

// In memory, the rows must also match the layout.
absl::Status CheckHiddenRows(const char* what, const HiddenStates& h) {
  const int64_t sequences = static_cast<int64_t>(h.lengths.size());
  if (h.rows.rows() != sequences * h.seq_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("block task: ", what, " hidden states are [",
                     h.rows.rows(), ", ", h.rows.cols(), "] for ", sequences,
                     " sequences of ", h.seq_len, " tokens"));
  }
  return absl::OkStatus();
}

absl::Status BlockRunner::WriteLeavingStates(const HiddenStateSource& source,
                                             HiddenStateSink* sink) const {
  const int seq_len = source.seq_len();
  QUANT_RETURN_IF_ERROR(ForEachChunk<RowMatrixF>(
      source, "writing the block's output",
      [&](const RowMatrixF& hidden, const std::vector<int>&) {
        return RunBlock(config_, Source(), rope_, seq_len, hidden);
      },
      [&](RowMatrixF& output, int64_t) { return sink->Append(output); }));
  return sink->Finish();
}

const std::vector<std::vector<LayerType>>& BlockRunner::DenseGroups() {
  static const auto* groups = new std::vector<std::vector<LayerType>>{
      {LayerType::kQProj, LayerType::kKProj, LayerType::kVProj},
      {LayerType::kOProj},
      {LayerType::kGateProj, LayerType::kUpProj},
      {LayerType::kDownProj}};
  return *groups;
}

absl::Status BlockRunner::StartRounds() {
  if (input_.chunk_tokens <= 0) {
    return absl::InvalidArgumentError("block task: chunk_tokens must be > 0");
  }
  if (config_.IsMoeBlock(input_.weights.block) ||
      input_.weights.moe.has_value() ||
      recipe_.propagation != Propagation::kSequential) {
    return absl::FailedPreconditionError(absl::StrCat(
        "block ", input_.weights.block,
        ": rounds cover sequential dense blocks; this one runs as one block "
        "task"));
  }
  return PlanLayers();
}

void BlockRunner::Restore(const BlockRoundState& state) {
  working_ = state.working;
  results_ = state.layers;
  groups_done_ = state.groups_done;
}

BlockRoundState BlockRunner::Save() && {
  BlockRoundState state;
  state.groups_done = groups_done_;
  state.working = std::move(working_);
  state.layers = std::move(results_);
  return state;
}

absl::StatusOr<std::unique_ptr<GroupActivationStatistics>>
BlockRunner::GatherShard(bool calibration, int64_t first_token) {
  if (groups_done_ < 0 || groups_done_ >= kBlockRoundGroups) {
    return absl::FailedPreconditionError(absl::StrCat(
        "block ", input_.weights.block, ": no layer group left to gather for (",
        groups_done_, " done)"));
  }
  const HiddenStateSource& shard = calibration ? *calibration_ : *heldout_;
  QUANT_RETURN_IF_ERROR(CheckHidden(calibration ? "calibration" : "held-out",
                                    shard, config_.hidden_size));
  GroupPlan plan = PlanGroup(DenseGroups()[groups_done_]);
  if (!plan.statistics.has_value()) return nullptr;
  if (calibration) plan.statistics->StartCalibrationAt(first_token);
  QUANT_RETURN_IF_ERROR(round_stash_ != nullptr
                            ? AccumulateStashed(shard, calibration, plan)
                            : Accumulate(shard, calibration, plan));
  QUANT_RETURN_IF_ERROR(plan.statistics->CloseShards());
  return std::make_unique<GroupActivationStatistics>(
      std::move(*plan.statistics));
}

absl::StatusOr<std::unique_ptr<GroupActivationStatistics>>
BlockRunner::EmptyShard() {
  if (groups_done_ < 0 || groups_done_ >= kBlockRoundGroups) {
    return absl::FailedPreconditionError(
        absl::StrCat("block ", input_.weights.block, ": no layer group left (",
                     groups_done_, " done)"));
  }
  GroupPlan plan = PlanGroup(DenseGroups()[groups_done_]);
  if (!plan.statistics.has_value()) return nullptr;
  return std::make_unique<GroupActivationStatistics>(
      std::move(*plan.statistics));
}

namespace {

// FailedPrecondition naming the first AWQ layer of `layers`, for a reduce
// that cannot give AWQ what it needs (`why`).
absl::Status RefuseAwq(int block, const std::vector<GroupLayerInput>& layers,
                       absl::string_view why) {
  for (const GroupLayerInput& layer : layers) {
    if (layer.settings.method == QuantMethod::kAwq) {
      return absl::FailedPreconditionError(
          absl::StrCat("block ", block, ": ", layer.name, " uses AWQ, ", why));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BlockRunner::Reduce(
    const std::vector<const GroupActivationStatistics*>& shards,
    std::optional<LayerType> only, bool heldout_later) {
  if (groups_done_ < 0 || groups_done_ >= kBlockRoundGroups) {
    return absl::FailedPreconditionError(absl::StrCat(
        "block ", input_.weights.block, ": no layer group left to reduce (",
        groups_done_, " done)"));
  }
  GroupPlan plan = PlanGroup(DenseGroups()[groups_done_]);
  plan.options.audit_heldout = !heldout_later;
  if (heldout_later) {
    QUANT_RETURN_IF_ERROR(RefuseAwq(
        input_.weights.block, plan.layers,
        "whose audit needs its group's input scale: its reduce waits for the "
        "held-out shards"));
  }
  if (only.has_value()) {
    const std::vector<LayerType>& types = plan.types;
    if (std::find(types.begin(), types.end(), *only) == types.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block ", input_.weights.block, ": ", LayerTypeName(*only),
          " is not in layer group ", groups_done_));
    }
    QUANT_RETURN_IF_ERROR(RefuseAwq(
        input_.weights.block, plan.layers,
        "whose input scale is shared by its group and folded into the op "
        "before it: the group is reduced whole"));
  }
  if (plan.statistics.has_value()) {
    for (const GroupActivationStatistics* shard : shards) {
      if (shard == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "block ", input_.weights.block, ": a shard of ",
            LayerTypeName(plan.types.front()), "'s group has no statistics"));
      }
      QUANT_RETURN_IF_ERROR(plan.statistics->MergeShard(*shard));
    }
  }
  if (only.has_value()) {
    // The statistics stay the group's (the shards' files hold the group's
    // kind); only this layer is quantized. GPTQ and RTN give a layer the
    // same result alone as with its group (QuantizeGptqLayers).
    plan.types = {*only};
    std::vector<GroupLayerInput> layers;
    std::vector<LayerType> quantized_types;
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      if (plan.quantized_types[i] != *only) continue;
      layers.push_back(plan.layers[i]);
      quantized_types.push_back(plan.quantized_types[i]);
    }
    plan.layers = std::move(layers);
    plan.quantized_types = std::move(quantized_types);
  }
  QUANT_ASSIGN_OR_RETURN(QuantizedGroup quantized, QuantizeLayers(plan));
  QUANT_RETURN_IF_ERROR(ApplyGroup(plan, std::move(quantized)));
  ++groups_done_;
  return absl::OkStatus();
}

absl::Status BlockRunner::AuditHeldout(
    const std::vector<HessianAccumulator>& heldout) {
  if (groups_done_ != kBlockRoundGroups) {
    return absl::FailedPreconditionError(
        absl::StrCat("block ", input_.weights.block,
                     ": the held-out audit comes after the ", kBlockRoundGroups,
                     " layer groups are reduced, ", groups_done_, " are"));
  }
  if (heldout.size() != static_cast<size_t>(kBlockRoundGroups)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block ", input_.weights.block, ": held-out statistics for ",
        heldout.size(), " layer groups, the block has ", kBlockRoundGroups));
  }
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    // The group's layers as its reduce planned them, less any the format
    // could not hold (not quantized, nothing to audit).
    const GroupPlan plan = PlanGroup(DenseGroups()[g], false);
    std::vector<PendingHeldoutAudit> pending;
    for (const LayerType type : plan.quantized_types) {
      LayerResult* result = Result(type);
      pending.push_back({&result->layer, &result->audit, &result->choices});
    }
    QUANT_RETURN_IF_ERROR(
        AuditGroupHeldout(plan.layers, pending, heldout[g], pool_));
  }
  return absl::OkStatus();
}

absl::StatusOr<BlockTaskOutput> BlockRunner::FinishRounds() {
  if (groups_done_ != kBlockRoundGroups) {
    return absl::FailedPreconditionError(
        absl::StrCat("block ", input_.weights.block, ": ", groups_done_, " of ",
                     kBlockRoundGroups, " layer groups reduced"));
  }
  BlockTaskOutput output;
  output.block = input_.weights.block;
  QUANT_ASSIGN_OR_RETURN(output.tensors, BlockTensors());
  output.effective = std::move(working_);
  output.layers = std::move(results_);
  return output;
}

absl::StatusOr<BlockTaskOutput> BlockRunner::Run() {
  if ((input_.calibration_source == nullptr) !=
      (input_.heldout_source == nullptr)) {
    return absl::InvalidArgumentError(
        "block task: set both hidden-state sources or neither");
  }
  if (input_.calibration_source == nullptr) {
    QUANT_RETURN_IF_ERROR(CheckHiddenRows("calibration", input_.calibration));
    QUANT_RETURN_IF_ERROR(CheckHiddenRows("held-out", input_.heldout));
  }
  QUANT_RETURN_IF_ERROR(
      CheckHidden("calibration", *calibration_, config_.hidden_size));
  QUANT_RETURN_IF_ERROR(
      CheckHidden("held-out", *heldout_, config_.hidden_size));
  if (input_.chunk_tokens <= 0) {
    return absl::InvalidArgumentError("block task: chunk_tokens must be > 0");
  }
  QUANT_RETURN_IF_ERROR(PlanLayers());
  const bool moe = config_.IsMoeBlock(input_.weights.block);
  if (moe != input_.weights.moe.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block task: block ", input_.weights.block,
        moe ? " is a mixture of experts but its weights have no experts"
            : " has experts the config does not route"));
  }
  std::vector<GroupPlan> plans;
  for (const std::vector<LayerType>& types : DenseGroups()) {
    // A mixture-of-experts block has no dense MLP groups.
    if (Result(types[0]) != nullptr) plans.push_back(PlanGroup(types));
  }
  BlockTaskOutput output;
  output.block = input_.weights.block;
  // Without the caller's sinks the leaving states are collected here (and
  // only then allocated: a task streaming to files must not hold them).
  std::optional<MemoryHiddenStateSink> calibration_memory, heldout_memory;
  HiddenStateSink* calibration_sink = input_.calibration_sink;
  if (calibration_sink == nullptr) {
    calibration_sink = &calibration_memory.emplace(
        calibration_->seq_len(), calibration_->lengths(), config_.hidden_size);
  }
  HiddenStateSink* heldout_sink = input_.heldout_sink;
  if (heldout_sink == nullptr) {
    heldout_sink = &heldout_memory.emplace(
        heldout_->seq_len(), heldout_->lengths(), config_.hidden_size);
  }
  if (moe) {
    // Each attention group's inputs computed from the block's input (with
    // the groups before it quantized under sequential propagation), then
    // the experts on the MLP input computed the same way.
    for (GroupPlan& plan : plans) {
      QUANT_RETURN_IF_ERROR(Accumulate(*calibration_, true, plan));
      QUANT_RETURN_IF_ERROR(Accumulate(*heldout_, false, plan));
      QUANT_ASSIGN_OR_RETURN(QuantizedGroup quantized, QuantizeLayers(plan));
      QUANT_RETURN_IF_ERROR(ApplyGroup(plan, std::move(quantized)));
    }
    QUANT_RETURN_IF_ERROR(QuantizeMoe(&output));
    QUANT_RETURN_IF_ERROR(WriteLeavingStates(*calibration_, calibration_sink));
    QUANT_RETURN_IF_ERROR(WriteLeavingStates(*heldout_, heldout_sink));
  } else if (recipe_.propagation == Propagation::kIndependent) {
    // Nothing a group's quantization does changes the next one's inputs.
    QUANT_RETURN_IF_ERROR(
        AccumulateAll(*calibration_, true, plans, calibration_sink));
    QUANT_RETURN_IF_ERROR(AccumulateAll(*heldout_, false, plans, heldout_sink));
    // The groups side by side (each one's layers then run on its thread),
    // their results applied in block order: folds reach earlier groups.
    std::vector<absl::StatusOr<QuantizedGroup>> quantized(plans.size());
    ParallelFor(pool_, static_cast<int64_t>(plans.size()),
                [&](int64_t i) { quantized[i] = QuantizeLayers(plans[i]); });
    for (size_t i = 0; i < plans.size(); ++i) {
      QUANT_RETURN_IF_ERROR(quantized[i].status());
      QUANT_RETURN_IF_ERROR(ApplyGroup(plans[i], *std::move(quantized[i])));
    }
  } else if (const std::optional<std::string> place = StashPlace();
             place.has_value()) {
    // Each group's inputs are computed with the groups before it
    // quantized; what later groups reuse is kept, so every layer runs once.
    stash_dir_ = *place;
    SplitStash calibration_stash, heldout_stash;
    for (size_t g = 0; g < plans.size(); ++g) {
      GroupPlan& plan = plans[g];
      QUANT_RETURN_IF_ERROR(StashedStage(g, *calibration_, true, "cal", plan,
                                         &calibration_stash));
      QUANT_RETURN_IF_ERROR(
          StashedStage(g, *heldout_, false, "heldout", plan, &heldout_stash));
      QUANT_ASSIGN_OR_RETURN(QuantizedGroup quantized, QuantizeLayers(plan));
      QUANT_RETURN_IF_ERROR(ApplyGroup(plan, std::move(quantized)));
    }
    QUANT_RETURN_IF_ERROR(
        WriteLeavingFromStash(&calibration_stash, calibration_sink));
    QUANT_RETURN_IF_ERROR(WriteLeavingFromStash(&heldout_stash, heldout_sink));
  } else {
    // No room for the stash: each group's inputs are computed again from
    // the block's input, with the groups before it quantized.
    for (GroupPlan& plan : plans) {
      QUANT_RETURN_IF_ERROR(Accumulate(*calibration_, true, plan));
      QUANT_RETURN_IF_ERROR(Accumulate(*heldout_, false, plan));
      QUANT_ASSIGN_OR_RETURN(QuantizedGroup quantized, QuantizeLayers(plan));
      QUANT_RETURN_IF_ERROR(ApplyGroup(plan, std::move(quantized)));
    }
    QUANT_RETURN_IF_ERROR(WriteLeavingStates(*calibration_, calibration_sink));
    QUANT_RETURN_IF_ERROR(WriteLeavingStates(*heldout_, heldout_sink));
  }
  QUANT_ASSIGN_OR_RETURN(output.tensors, BlockTensors());
  if (calibration_memory.has_value()) {
    output.calibration_out = std::move(calibration_memory->states());
  }
  if (heldout_memory.has_value()) {
    output.heldout_out = std::move(heldout_memory->states());
  }
  output.effective = std::move(working_);
  output.layers = std::move(results_);
  return output;
}

}  // namespace

int64_t ShardRoundStash::bytes() const {
  int64_t total = 0;
  for (const std::vector<RowMatrixF>* kind : {&context, &residual}) {
    for (const RowMatrixF& m : *kind) {
      total +=
          static_cast<int64_t>(m.size()) * static_cast<int64_t>(sizeof(float));
    }
  }
  return total;
}

int64_t BlockStashBytes(const ModelConfig& config, int64_t rows) {
  // Peak: the residual stream with the MLP's hidden state (or, one group
  // earlier, with the attention context), both splits at once.
  const int64_t width =
      config.hidden_size +
      std::max<int64_t>(config.intermediate_size, config.q_size());
  return rows * width * static_cast<int64_t>(sizeof(float));
}

RowMatrixF RealRows(const ConstRowMatrixRef& rows, int seq_len,
                    const std::vector<int>& lengths) {
  int64_t total = 0;
  for (int length : lengths) total += length;
  RowMatrixF out(total, rows.cols());
  int64_t at = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    out.middleRows(at, lengths[i]) =
        rows.middleRows(static_cast<int64_t>(i) * seq_len, lengths[i]);
    at += lengths[i];
  }
  return out;
}

namespace {

// The rounds report no progress (their tasks report their own).
const LayerProgress& NoProgress() {
  static const auto* none = new LayerProgress();
  return *none;
}

absl::Status CheckTaskInput(const BlockTaskInput& input) {
  if (input.config == nullptr || input.recipe == nullptr) {
    return absl::InvalidArgumentError("block task: config and recipe needed");
  }
  if (input.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("block task: threads must be >= 1, got ", input.threads));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<LayerType> BlockRoundGroupTypes(int group) {
  if (group < 0 || group >= kBlockRoundGroups) return {};
  return BlockRunner::DenseGroups()[group];
}

bool RoundReducesByLayer(const Recipe& recipe) {
  if (recipe.method == QuantMethod::kAwq) return false;
  for (const LayerOverride& o : recipe.overrides) {
    if (o.method == QuantMethod::kAwq) return false;
  }
  return true;
}

std::vector<std::optional<LayerType>> RoundGroupReduces(int group,
                                                        bool by_layer) {
  const std::vector<LayerType> types = BlockRoundGroupTypes(group);
  if (!by_layer || types.size() < 2) return {std::nullopt};
  return std::vector<std::optional<LayerType>>(types.begin(), types.end());
}

absl::StatusOr<BlockRoundState> StartBlockRounds(const BlockTaskInput& input) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  BlockRunner runner(input, NoProgress(), nullptr);
  QUANT_RETURN_IF_ERROR(runner.StartRounds());
  return std::move(runner).Save();
}

absl::StatusOr<std::unique_ptr<GroupActivationStatistics>>
GatherShardStatistics(const BlockTaskInput& input, const BlockRoundState& state,
                      bool calibration, const HiddenStateSource& shard,
                      int64_t first_token, ShardRoundStash* stash) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  ThreadPool pool(input.threads);
  BlockRunner runner(input, NoProgress(), &pool, &shard, &shard);
  runner.Restore(state);
  runner.set_round_stash(stash);
  return runner.GatherShard(calibration, first_token);
}

absl::StatusOr<std::unique_ptr<GroupActivationStatistics>> EmptyShardStatistics(
    const BlockTaskInput& input, const BlockRoundState& state) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  BlockRunner runner(input, NoProgress(), nullptr);
  runner.Restore(state);
  return runner.EmptyShard();
}

absl::StatusOr<std::vector<std::unique_ptr<GroupActivationStatistics>>>
EmptyShardStatistics(const BlockTaskInput& input, const BlockRoundState& state,
                     int count) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  BlockRunner runner(input, NoProgress(), nullptr);
  runner.Restore(state);
  std::vector<std::unique_ptr<GroupActivationStatistics>> empties;
  for (int i = 0; i < count; ++i) {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<GroupActivationStatistics> empty,
                           runner.EmptyShard());
    if (empty == nullptr) return empties;
    empties.push_back(std::move(empty));
  }
  return empties;
}

absl::Status ReduceBlockRound(
    const BlockTaskInput& input,
    const std::vector<const GroupActivationStatistics*>& shards,
    BlockRoundState* state, std::optional<LayerType> layer) {
  RoundReduceOptions options;
  options.layer = layer;
  return ReduceBlockRound(input, shards, state, options);
}

absl::Status ReduceBlockRound(
    const BlockTaskInput& input,
    const std::vector<const GroupActivationStatistics*>& shards,
    BlockRoundState* state, const RoundReduceOptions& options) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  ThreadPool pool(input.threads);
  BlockRunner runner(input, NoProgress(), &pool);
  runner.Restore(*state);
  QUANT_RETURN_IF_ERROR(
      runner.Reduce(shards, options.layer, options.heldout_later));
  *state = std::move(runner).Save();
  return absl::OkStatus();
}

absl::Status AuditBlockRoundsHeldout(
    const BlockTaskInput& input, const std::vector<HessianAccumulator>& heldout,
    BlockRoundState* state) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  ThreadPool pool(input.threads);
  BlockRunner runner(input, NoProgress(), &pool);
  runner.Restore(*state);
  QUANT_RETURN_IF_ERROR(runner.AuditHeldout(heldout));
  *state = std::move(runner).Save();
  return absl::OkStatus();
}

std::vector<int64_t> BlockRoundsHeldoutColumns(const BlockRoundState& state) {
  std::vector<int64_t> columns;
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    const std::vector<LayerType> types = BlockRoundGroupTypes(g);
    int64_t k = 0;
    for (const LayerResult& layer : state.layers) {
      if (layer.quantized &&
          std::find(types.begin(), types.end(), layer.type) != types.end()) {
        k = layer.layer.dequantized.cols();
      }
    }
    columns.push_back(k);
  }
  return columns;
}

absl::Status WriteShardOutput(const BlockTaskInput& input,
                              const BlockRoundState& state,
                              const HiddenStateSource& shard,
                              HiddenStateSink* sink, ShardRoundStash* stash) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  if (state.groups_done != kBlockRoundGroups) {
    return absl::FailedPreconditionError(
        absl::StrCat("block ", input.weights.block, ": the output needs all ",
                     kBlockRoundGroups, " layer groups reduced, ",
                     state.groups_done, " are"));
  }
  QUANT_RETURN_IF_ERROR(
      CheckHidden("calibration", shard, input.config->hidden_size));
  ThreadPool pool(input.threads);
  BlockRunner runner(input, NoProgress(), &pool, &shard, &shard);
  runner.Restore(state);
  runner.set_round_stash(stash);
  return runner.WriteShard(sink);
}

absl::StatusOr<BlockTaskOutput> FinishBlockRounds(const BlockTaskInput& input,
                                                  BlockRoundState state) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  BlockRunner runner(input, NoProgress(), nullptr);
  runner.Restore(state);
  return runner.FinishRounds();
}

absl::StatusOr<BlockTaskOutput> RunBlockTask(const BlockTaskInput& input,
                                             const LayerProgress& progress) {
  QUANT_RETURN_IF_ERROR(CheckTaskInput(input));
  ThreadPool pool(input.threads);
  BlockRunner runner(input, progress, &pool);
  return runner.Run();
}

}  // namespace quant
