// End to end: stories260K with its attention (and, for compressed-tensors,
// MLP input) layers RTN-quantized and written as a packed checkpoint
// directory, then loaded by LlamaModel (its logits must equal those of the
// float model with the dequantized weights swapped in, bit for bit) and
// evaluated by `quantctl eval` and by the gates' block-streamed evaluation
// (the same numbers as the whole models).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/eval/evaluate.h"
#include "core/eval/evaluation_parts.h"
#include "core/eval/streamed_evaluation.h"
#include "core/forward/llama_model.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "core/pack/checkpoint_config.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/gptq_format.h"
#include "core/pack/packed_tensor.h"
#include "core/quant/rtn.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;
using ::testing::HasSubstr;

// Packs one quantized layer, or returns no tensors to keep it plain.
using LayerPacker = std::function<absl::StatusOr<std::vector<PackedTensor>>(
    const QuantizedLayer&, const LinearLayerSpec&)>;

class EvalPackedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(source_);
    QUANT_REQUIRE_SHARED(text_);
    absl::StatusOr<std::unique_ptr<Checkpoint>> source =
        Checkpoint::Open(source_);
    ASSERT_TRUE(source.ok()) << source.status();
    source_checkpoint_ = *std::move(source);
    absl::StatusOr<std::unique_ptr<LlamaModel>> model =
        LlamaModel::Load(*source_checkpoint_);
    ASSERT_TRUE(model.ok()) << model.status();
    expected_model_ = *std::move(model);
  }

  // Quantizes the layers `quantize` selects with RTN on `grid`, packs those
  // `pack` accepts into a new checkpoint directory (the rest stay plain
  // .weight tensors), swaps the weights the packed checkpoint must
  // dequantize to (fp16 scales) into expected_model_, and returns the
  // directory.
  std::string WritePacked(
      const std::function<bool(const LinearLayerSpec&)>& quantize,
      const GridSpec& grid, const LayerPacker& pack,
      const nlohmann::json& block) {
    const ModelConfig& config = source_checkpoint_->config();
    std::vector<PackedTensor> packed_tensors;
    std::vector<std::string> replaced;
    for (const LinearLayerSpec& spec : ListAllLinearLayers(config)) {
      if (!quantize(spec)) continue;
      LinearWeights& linear =
          expected_model_->mutable_block(spec.block)->linear[spec.type];
      absl::StatusOr<QuantizedLayer> layer =
          QuantizeRtn(linear.weight, grid, spec.name);
      EXPECT_TRUE(layer.ok()) << layer.status();
      if (!layer.ok()) return "";
      absl::StatusOr<std::vector<PackedTensor>> tensors = pack(*layer, spec);
      EXPECT_TRUE(tensors.ok()) << tensors.status();
      if (!tensors.ok() || tensors->empty()) continue;
      for (PackedTensor& tensor : *tensors) {
        packed_tensors.push_back(std::move(tensor));
      }
      replaced.push_back(spec.weight_name());
      for (int64_t r = 0; r < layer->rows; ++r) {
        for (int64_t c = 0; c < layer->cols; ++c) {
          const int32_t g = layer->g_idx[static_cast<size_t>(c)];
          linear.weight(r, c) =
              RoundTripThrough(layer->scales(g, r), DType::kF16) *
              (static_cast<float>(layer->codes(r, c)) - layer->zeros(g, r));
        }
      }
      ++packed_layers_;
    }

    std::vector<TensorToWrite> to_write = AsTensorsToWrite(packed_tensors);
    for (const TensorCollection::Entry& entry :
         source_checkpoint_->tensors().Entries()) {
      if (std::find(replaced.begin(), replaced.end(), entry.info->name) !=
          replaced.end()) {
        continue;
      }
      const absl::Span<const uint8_t> bytes = entry.file->RawBytes(*entry.info);
      to_write.push_back(
          {entry.info->name, entry.info->dtype, entry.info->shape,
           absl::string_view(reinterpret_cast<const char*>(bytes.data()),
                             bytes.size())});
    }
    const std::string dir = ::quant::testing::MakeTempDir();
    absl::Status status =
        WriteSafetensors(dir + "/model.safetensors", to_write);
    EXPECT_TRUE(status.ok()) << status;
    absl::StatusOr<std::string> config_text =
        ReadFileToString(source_ + "/config.json");
    EXPECT_TRUE(config_text.ok()) << config_text.status();
    absl::StatusOr<std::string> with_block =
        WithQuantizationConfig(*config_text, block);
    EXPECT_TRUE(with_block.ok()) << with_block.status();
    status = WriteFileAtomically(dir + "/config.json", *with_block);
    EXPECT_TRUE(status.ok()) << status;
    for (const char* file : {"tokenizer.json", "tokenizer_config.json",
                             "special_tokens_map.json"}) {
      absl::StatusOr<std::string> contents =
          ReadFileToString(source_ + "/" + file);
      EXPECT_TRUE(contents.ok()) << contents.status();
      status = WriteFileAtomically(dir + "/" + file, *contents);
      EXPECT_TRUE(status.ok()) << status;
    }
    return dir;
  }

  // Loads `dir`, checks its packed layers and that its logits equal
  // expected_model_'s exactly (and differ from the float model's).
  void ExpectLogitsMatch(const std::string& dir, absl::string_view method) {
    absl::StatusOr<std::unique_ptr<Checkpoint>> refused = Checkpoint::Open(dir);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    CheckpointOptions options;
    options.allow_packed = true;
    options.check_finite = true;
    absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
        Checkpoint::Open(dir, options);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_EQ((*checkpoint)->quantization_config()["quant_method"],
              std::string(method));
    EXPECT_EQ(static_cast<int>((*checkpoint)->packed_layers().size()),
              packed_layers_);
    EXPECT_THAT((*checkpoint)->unexpected_tensors(), ::testing::IsEmpty());
    absl::StatusOr<std::unique_ptr<LlamaModel>> model =
        LlamaModel::Load(**checkpoint);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<std::unique_ptr<LlamaModel>> float_model =
        LlamaModel::Load(*source_checkpoint_);
    ASSERT_TRUE(float_model.ok()) << float_model.status();

    const std::vector<std::vector<int32_t>> batch = {
        {1, 45, 300, 12, 87, 4, 200, 9, 66, 150, 3, 17},
        {1, 7, 8, 9, 10, 250, 33, 2, 101, 5, 60, 499}};
    absl::StatusOr<RowMatrixF> logits = (*model)->Forward(batch);
    absl::StatusOr<RowMatrixF> expected = expected_model_->Forward(batch);
    absl::StatusOr<RowMatrixF> unquantized = (*float_model)->Forward(batch);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(unquantized.ok()) << unquantized.status();
    ASSERT_EQ(logits->rows(), expected->rows());
    ASSERT_EQ(logits->cols(), expected->cols());
    EXPECT_EQ((*logits - *expected).cwiseAbs().maxCoeff(), 0.0f);
    // The quantization is visible: the packed weights are not the floats.
    EXPECT_GT((*logits - *unquantized).cwiseAbs().maxCoeff(), 1e-4f);

    ExpectStreamedEvaluationMatches(**checkpoint, **model, **float_model);
  }

  // The gates' block-by-block evaluation of the checkpoints gives exactly
  // the numbers of the whole models, whatever the chunking.
  void ExpectStreamedEvaluationMatches(const Checkpoint& packed,
                                       const LlamaModel& model,
                                       const LlamaModel& float_model) {
    // Windows of mixed lengths (one too short to score), so batches are cut
    // to different lengths.
    TokenWindows windows;
    windows.seq_len = 20;
    uint32_t state = 12345;
    for (int w = 0; w < 11; ++w) {
      std::vector<int32_t> ids(windows.seq_len, 0);
      ids[0] = 1;
      for (size_t i = 1; i < ids.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        ids[i] = 3 + static_cast<int32_t>((state >> 8) % 497);
      }
      windows.sequences.push_back(std::move(ids));
      windows.lengths.push_back(w == 4 ? 1 : 20 - w);
    }
    absl::StatusOr<NextTokenMetrics> whole =
        EvaluateWindows(model, &float_model, windows, /*batch_windows=*/3);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_GT(whole->mean_kl, 0.0);
    // One batch per chunk; then everything in one chunk, its 4 batches on
    // 1 and on 3 threads: the same numbers.
    for (const auto& [bound, threads] : std::vector<std::pair<int64_t, int>>{
             {1, 1}, {int64_t{1} << 30, 1}, {int64_t{1} << 30, 3}}) {
      SCOPED_TRACE(absl::StrCat("max_hidden_bytes ", bound, ", ", threads,
                                " thread(s)"));
      ThreadPool pool(threads);
      StreamedEvaluationOptions options;
      options.batch_windows = 3;
      options.max_hidden_bytes = bound;
      options.pool = &pool;
      std::vector<std::pair<int, int>> calls;
      options.progress = [&](int done, int total) {
        calls.emplace_back(done, total);
      };
      absl::StatusOr<NextTokenMetrics> streamed =
          EvaluateCheckpoints(packed, *source_checkpoint_, windows, options);
      ASSERT_TRUE(streamed.ok()) << streamed.status();
      EXPECT_EQ(streamed->tokens, whole->tokens);
      EXPECT_EQ(streamed->reference_nll, whole->reference_nll);
      EXPECT_EQ(streamed->quantized_nll, whole->quantized_nll);
      EXPECT_EQ(streamed->ppl_ratio, whole->ppl_ratio);
      EXPECT_EQ(streamed->mean_kl, whole->mean_kl);
      EXPECT_EQ(streamed->top1_agreement, whole->top1_agreement);
      // 10 scorable windows in batches of 3: 4 batches.
      EXPECT_EQ(calls.size(), bound == 1 ? 4u : 1u);
      ASSERT_FALSE(calls.empty());
      EXPECT_EQ(calls.back(), std::make_pair(11, 11));

      // Scored together with the reference itself (what a previous release
      // is scored beside): the packed model's numbers unchanged, and the
      // reference against itself exactly even.
      absl::StatusOr<std::vector<NextTokenMetrics>> together =
          EvaluateCheckpointsTogether({&packed, source_checkpoint_.get()},
                                      *source_checkpoint_, windows, options);
      ASSERT_TRUE(together.ok()) << together.status();
      ASSERT_EQ(together->size(), 2u);
      EXPECT_EQ((*together)[0].quantized_nll, whole->quantized_nll);
      EXPECT_EQ((*together)[0].mean_kl, whole->mean_kl);
      EXPECT_EQ((*together)[0].top1_agreement, whole->top1_agreement);
      EXPECT_EQ((*together)[1].reference_nll, whole->reference_nll);
      EXPECT_EQ((*together)[1].quantized_nll, whole->reference_nll);
      EXPECT_EQ((*together)[1].ppl_ratio, 1.0);
      EXPECT_EQ((*together)[1].top1_agreement, 1.0);

      ExpectPartsMergeToTheWhole(packed, windows, options, *together);
    }
    EXPECT_FALSE(EvaluateCheckpointsTogether({}, *source_checkpoint_, windows,
                                             StreamedEvaluationOptions())
                     .ok());
  }

  // The evaluation cut into parts scored apart (as tasks on different
  // workers would score them), written, read back and merged in any order:
  // the numbers of the whole, bit for bit. Gaps and overlaps are refused.
  void ExpectPartsMergeToTheWhole(const Checkpoint& packed,
                                  const TokenWindows& windows,
                                  const StreamedEvaluationOptions& options,
                                  const std::vector<NextTokenMetrics>& whole) {
    ASSERT_EQ(CountEvaluationBatches(windows, options.batch_windows), 4);
    const std::vector<const Checkpoint*> models = {&packed,
                                                   source_checkpoint_.get()};
    const std::string dir = ::quant::testing::MakeTempDir();
    std::vector<EvaluationPart> parts;  // Batches [3, 4), [0, 1), [1, 3).
    for (const auto& [first, count] :
         std::vector<std::pair<int64_t, int64_t>>{{3, 1}, {0, 1}, {1, 2}}) {
      absl::StatusOr<EvaluationPart> part = ScoreEvaluationPart(
          models, *source_checkpoint_, windows, first, count, options);
      ASSERT_TRUE(part.ok()) << part.status();
      EXPECT_EQ(part->total_batches, 4);
      const std::string path =
          JoinPath(dir, absl::StrCat("part-", first, ".safetensors"));
      ASSERT_TRUE(WriteEvaluationPart(path, *part).ok());
      absl::StatusOr<EvaluationPart> read = ReadEvaluationPart(path);
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_EQ(read->scores.size(), 2u);
      EXPECT_EQ(read->scores[0].size(), part->scores[0].size());
      EXPECT_GT(read->scores[0].size(), 0u);
      parts.push_back(*std::move(read));
    }
    absl::StatusOr<std::vector<NextTokenMetrics>> merged =
        MergeEvaluationParts(parts);
    ASSERT_TRUE(merged.ok()) << merged.status();
    ASSERT_EQ(merged->size(), whole.size());
    for (size_t m = 0; m < whole.size(); ++m) {
      SCOPED_TRACE(absl::StrCat("model ", m));
      EXPECT_EQ((*merged)[m].tokens, whole[m].tokens);
      EXPECT_EQ((*merged)[m].reference_nll, whole[m].reference_nll);
      EXPECT_EQ((*merged)[m].quantized_nll, whole[m].quantized_nll);
      EXPECT_EQ((*merged)[m].ppl_ratio, whole[m].ppl_ratio);
      EXPECT_EQ((*merged)[m].mean_kl, whole[m].mean_kl);
      EXPECT_EQ((*merged)[m].top1_agreement, whole[m].top1_agreement);
    }
    EXPECT_THAT(MergeEvaluationParts({parts[0], parts[2]}).status().message(),
                HasSubstr("batches [0, 1) are missing"));
    EXPECT_THAT(MergeEvaluationParts({parts[1], parts[2]}).status().message(),
                HasSubstr("batches [3, 4) are missing"));
    EXPECT_THAT(MergeEvaluationParts({parts[1], parts[1], parts[2], parts[0]})
                    .status()
                    .message(),
                HasSubstr("batch 0 is in two parts"));
    EXPECT_THAT(MergeEvaluationParts({}).status().message(),
                HasSubstr("no evaluation parts"));
    EXPECT_THAT(
        ScoreEvaluationPart(models, *source_checkpoint_, windows, 3, 2, options)
            .status()
            .message(),
        HasSubstr("batches [3, 5) asked of 4 batches"));
    // A part of another model count is not merged with these.
    EvaluationPart other = parts[1];
    other.scores.pop_back();
    EXPECT_THAT(
        MergeEvaluationParts({other, parts[2], parts[0]}).status().message(),
        HasSubstr("different evaluations"));
  }

  // `quantctl eval` of `dir` against the float model, as JSON and text.
  void ExpectEval(const std::string& dir, absl::string_view method) {
    const RunResult result = RunQuantctl(
        "eval --checkpoint " + Quote(dir) + " --reference " + Quote(source_) +
        " --text " + Quote(text_) + " --max_documents 20 --json");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const nlohmann::json output =
        nlohmann::json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(output.is_discarded()) << result.out;
    EXPECT_EQ(output["quantization"], std::string(method));
    EXPECT_TRUE(output["reference_quantization"].is_null());
    ASSERT_TRUE(output["perplexity"].is_number()) << result.out;
    const double perplexity = output["perplexity"];
    const double ratio = output["ppl_ratio"];
    std::printf("%s packed stories260K: ppl %.4f, ratio %.4f, top-1 %.4f\n",
                std::string(method).c_str(), perplexity, ratio,
                output["top1_agreement"].get<double>());
    EXPECT_TRUE(std::isfinite(perplexity));
    EXPECT_GT(perplexity, 1.0);
    // 4-bit weights in some layers: close to the float model, not equal.
    EXPECT_NE(ratio, 1.0);
    EXPECT_GT(ratio, 0.9);
    EXPECT_LT(ratio, 1.5);
    EXPECT_LT(output["top1_agreement"].get<double>(), 1.0);

    const RunResult text =
        RunQuantctl("eval --checkpoint " + Quote(dir) + " --text " +
                    Quote(text_) + " --max_documents 5");
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_THAT(text.out,
                HasSubstr("quantization          " + std::string(method)));
  }

  const std::string source_ =
      ::quant::testing::SharedPath("models/stories260K/hf-f32");
  const std::string text_ =
      ::quant::testing::SharedPath("data/tinystories_val.txt");
  std::unique_ptr<Checkpoint> source_checkpoint_;
  std::unique_ptr<LlamaModel> expected_model_;
  int packed_layers_ = 0;
};

bool IsAttention(const LinearLayerSpec& spec) {
  return spec.input_group == InputGroup::kAttnIn ||
         spec.input_group == InputGroup::kAttnOut;
}

TEST_F(EvalPackedCheckpointTest, GptqCheckpointEvaluatesAsDequantized) {
  // gate/up/down have 172-wide dimensions GPTQ v1 cannot pack at 4 bits:
  // they stay .weight tensors, declared unquantized in the config.
  GptqConfigOptions options;
  options.bits = 4;
  options.group_size = 32;
  for (const LinearLayerSpec& spec :
       ListAllLinearLayers(source_checkpoint_->config())) {
    if (!IsAttention(spec)) options.unquantized_layers.push_back(spec.name);
  }
  absl::StatusOr<nlohmann::json> block = GptqQuantizationConfig(options);
  ASSERT_TRUE(block.ok()) << block.status();
  GridSpec grid;
  grid.kind = GridKind::kSym;
  grid.bits = 4;
  grid.group_size = 32;
  const std::string dir = WritePacked(
      IsAttention, grid,
      [](const QuantizedLayer& layer, const LinearLayerSpec& spec)
          -> absl::StatusOr<std::vector<PackedTensor>> {
        absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, spec.name);
        if (!packed.ok()) return packed.status();
        return GptqLayerTensors(*packed);
      },
      *block);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(packed_layers_, 4 * source_checkpoint_->config().num_hidden_layers);
  ExpectLogitsMatch(dir, "gptq");
  ExpectEval(dir, "gptq");
}

TEST_F(EvalPackedCheckpointTest, CompressedTensorsCheckpointEvaluates) {
  // Asymmetric groups of 32 fit every layer whose K is a multiple of 32:
  // all but down_proj (K = 172), which is ignored.
  CompressedTensorsConfigOptions options;
  options.bits = 4;
  options.group_size = 32;
  options.symmetric = false;
  for (const LinearLayerSpec& spec :
       ListAllLinearLayers(source_checkpoint_->config())) {
    if (spec.in_features % 32 != 0) options.ignore.push_back(spec.name);
  }
  ASSERT_FALSE(options.ignore.empty());
  absl::StatusOr<nlohmann::json> block =
      CompressedTensorsQuantizationConfig(options);
  ASSERT_TRUE(block.ok()) << block.status();
  GridSpec grid;
  grid.kind = GridKind::kAsym;
  grid.bits = 4;
  grid.group_size = 32;
  const std::string dir = WritePacked(
      [](const LinearLayerSpec& spec) { return spec.in_features % 32 == 0; },
      grid,
      [](const QuantizedLayer& layer, const LinearLayerSpec& spec)
          -> absl::StatusOr<std::vector<PackedTensor>> {
        absl::StatusOr<PackedCompressedTensorsLayer> packed =
            PackCompressedTensors(layer, spec.name);
        if (!packed.ok()) return packed.status();
        return CompressedTensorsLayerTensors(*packed);
      },
      *block);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(packed_layers_, 6 * source_checkpoint_->config().num_hidden_layers);
  ExpectLogitsMatch(dir, "compressed-tensors");
  ExpectEval(dir, "compressed-tensors");
}

// Checkpoint::Open with allow_packed: a packed layer missing one of its
// tensors, and a quant_method no reader exists for, are refused by name.
TEST_F(EvalPackedCheckpointTest, OpenRefusesIncompleteOrUnreadable) {
  GptqConfigOptions options;
  options.group_size = 32;
  absl::StatusOr<nlohmann::json> block = GptqQuantizationConfig(options);
  ASSERT_TRUE(block.ok()) << block.status();
  GridSpec grid;
  grid.group_size = 32;
  const std::string victim = "model.layers.0.self_attn.k_proj";
  const std::string dir = WritePacked(
      IsAttention, grid,
      [&victim](const QuantizedLayer& layer, const LinearLayerSpec& spec)
          -> absl::StatusOr<std::vector<PackedTensor>> {
        absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, spec.name);
        if (!packed.ok()) return packed.status();
        std::vector<PackedTensor> tensors;
        for (PackedTensor& tensor : GptqLayerTensors(*packed)) {
          if (tensor.name != victim + ".scales") {
            tensors.push_back(std::move(tensor));
          }
        }
        return tensors;
      },
      *block);
  ASSERT_FALSE(HasFailure());
  CheckpointOptions allow;
  allow.allow_packed = true;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir, allow);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("missing tensor \"" + victim + ".scales\""));

  nlohmann::json awq = *block;
  awq["quant_method"] = "awq";
  absl::StatusOr<std::string> config_text =
      ReadFileToString(source_ + "/config.json");
  ASSERT_TRUE(config_text.ok()) << config_text.status();
  ASSERT_TRUE(WriteFileAtomically(dir + "/config.json",
                                  *WithQuantizationConfig(*config_text, awq))
                  .ok());
  checkpoint = Checkpoint::Open(dir, allow);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("\"awq\""));
  const RunResult result =
      RunQuantctl("eval --checkpoint " + Quote(dir) + " --text " +
                  Quote(text_) + " --max_documents 1");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.err, HasSubstr("awq"));
}

}  // namespace
}  // namespace quant
