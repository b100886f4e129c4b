// The block task on stories260K's block 0: what each layer group is
// calibrated on in sequential and independent propagation, what the block
// hands to the next one, AWQ's fold, and that the packed tensors hold exactly
// the weights the audit measured (read back with the independent unpacker).
#include "core/pipeline/block_task.h"

#include <cmath>

#include "core/forward/block_forward.h"
#include "core/forward/rope.h"
#include "core/io/safetensors.h"
#include "core/pack/packed_tensor.h"
#include "core/pipeline/task_io.h"
#include "core/quant/rtn.h"
#include "gtest/gtest.h"
#include "tests/pack/reference_unpacker.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/fault_injecting_file_system.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::Block0Input;
using testing::LoadStories260K;
using testing::SmallRecipe;

double RelativeDifference(const RowMatrixF& a, const RowMatrixF& b) {
  return (a - b).norm() / b.norm();
}

class BlockTaskTest : public ::testing::Test {
 protected:
  void SetUp() override { QUANT_REQUIRE_SHARED(testing::Stories260KDir()); }

  // Runs block 0 with `recipe`.
  BlockTaskOutput Run(const Recipe& recipe) {
    auto loaded = LoadStories260K(recipe);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    loaded_ = std::move(*loaded);
    auto input = Block0Input(loaded_, recipe);
    EXPECT_TRUE(input.ok()) << input.status();
    input_ = std::move(*input);
    input_.recipe = &recipe;
    auto output = RunBlockTask(input_);
    EXPECT_TRUE(output.ok()) << output.status();
    return output.ok() ? std::move(*output) : BlockTaskOutput();
  }

  RowMatrixF RunBlockWith(const BlockWeights& weights,
                          const HiddenStates& hidden) {
    RopeTable rope(loaded_.model->config(), hidden.seq_len);
    return RunBlock(loaded_.model->config(), weights, rope, hidden.seq_len,
                    hidden.rows);
  }

  testing::LoadedModel loaded_;
  BlockTaskInput input_;
};

TEST_F(BlockTaskTest, RtnLayersEqualStandaloneRtnAndSequentialOutputUsesThem) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  const BlockTaskOutput out = Run(recipe);
  ASSERT_EQ(out.layers.size(), 7u);
  for (const LayerResult& layer : out.layers) {
    ASSERT_TRUE(layer.quantized) << layer.name << ": " << layer.reason;
    const GridSpec grid{GridKind::kSym, 4, 0, /*f16_scales=*/true};
    auto rtn =
        QuantizeRtn(input_.weights.Linear(layer.type).weight, grid, layer.name);
    ASSERT_TRUE(rtn.ok());
    EXPECT_EQ(layer.layer.dequantized, rtn->dequantized) << layer.name;
    EXPECT_EQ(out.effective.Linear(layer.type).weight, rtn->dequantized);
    // RTN against itself: gain exactly 1 on both splits.
    EXPECT_DOUBLE_EQ(layer.audit.gain_heldout, 1.0) << layer.name;
    EXPECT_GT(layer.audit.hessian.tokens, 0);
  }
  // The next block receives the quantized block's output.
  EXPECT_EQ(out.calibration_out.rows,
            RunBlockWith(out.effective, input_.calibration));
  EXPECT_EQ(out.heldout_out.rows, RunBlockWith(out.effective, input_.heldout));
  EXPECT_GT(
      RelativeDifference(out.calibration_out.rows,
                         RunBlockWith(input_.weights, input_.calibration)),
      1e-4);
}

TEST_F(BlockTaskTest, IndependentPropagationPassesOnTheUnquantizedOutput) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  const BlockTaskOutput out = Run(recipe);
  EXPECT_EQ(out.calibration_out.rows,
            RunBlockWith(input_.weights, input_.calibration));
  EXPECT_EQ(out.heldout_out.rows, RunBlockWith(input_.weights, input_.heldout));
}

TEST_F(BlockTaskTest, SequentialCalibratesLaterGroupsOnQuantizedInputs) {
  const Recipe sequential =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  const BlockTaskOutput seq = Run(sequential);
  const Recipe independent =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  const BlockTaskOutput ind = Run(independent);
  ASSERT_EQ(seq.layers.size(), 7u);
  ASSERT_EQ(ind.layers.size(), 7u);
  // q, k, v read the block's input in both modes: identical results.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seq.layers[i].layer.codes, ind.layers[i].layer.codes)
        << seq.layers[i].name;
  }
  // o, gate, up, down read activations downstream of quantized layers only
  // in sequential mode.
  for (int i = 3; i < 7; ++i) {
    EXPECT_NE(seq.layers[i].layer.dequantized, ind.layers[i].layer.dequantized)
        << seq.layers[i].name;
  }
}

TEST_F(BlockTaskTest, GptqBeatsRtnOnHeldOutOutputError) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 16, 128);
  const BlockTaskOutput out = Run(recipe);
  int better = 0;
  for (const LayerResult& layer : out.layers) {
    ASSERT_TRUE(layer.quantized);
    EXPECT_EQ(layer.audit.method, "gptq");
    EXPECT_GT(layer.choices.damp_used, 0.0);
    better += layer.audit.method_heldout.relative_error <
              layer.audit.rtn_heldout.relative_error;
  }
  EXPECT_GE(better, 5) << "of 7 layers";
}

// Converts the block's packed tensors for the independent unpacker.
testing::StoredTensors AsStored(const std::vector<PackedTensor>& tensors) {
  testing::StoredTensors stored;
  for (const PackedTensor& t : tensors) {
    stored[t.name] = {t.dtype, t.shape, t.bytes};
  }
  return stored;
}

TEST_F(BlockTaskTest, GptqFormatPacksExactlyTheAuditedWeights) {
  Recipe recipe = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                              Propagation::kSequential);
  recipe.act_order = true;
  const BlockTaskOutput out = Run(recipe);
  const testing::StoredTensors stored = AsStored(out.tensors);
  int packed = 0;
  for (const LayerResult& layer : out.layers) {
    if (!layer.quantized) {
      // stories260K's MLP width 172 is not a multiple of 8.
      EXPECT_NE(layer.reason.find("172"), std::string::npos) << layer.reason;
      EXPECT_TRUE(stored.count(layer.name + ".weight")) << layer.name;
      EXPECT_EQ(out.effective.Linear(layer.type).weight,
                input_.weights.Linear(layer.type).weight);
      continue;
    }
    ++packed;
    auto unpacked = testing::UnpackGptqV1(stored, layer.name, 4);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    const RowMatrixF weight = Eigen::Map<const RowMatrixF>(
        unpacked->weight.data(), unpacked->rows, unpacked->cols);
    EXPECT_EQ(weight, layer.layer.dequantized) << layer.name;
    EXPECT_EQ(weight, out.effective.Linear(layer.type).weight) << layer.name;
  }
  EXPECT_EQ(packed, 4);  // q, k, v, o
}

TEST_F(BlockTaskTest, CompressedTensorsPacksEveryLayerExactly) {
  Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  recipe.grid = QuantGrid::kAsym;
  const BlockTaskOutput out = Run(recipe);
  const testing::StoredTensors stored = AsStored(out.tensors);
  for (const LayerResult& layer : out.layers) {
    ASSERT_TRUE(layer.quantized) << layer.name;
    auto unpacked = testing::UnpackCompressedTensors(stored, layer.name, 4,
                                                     /*symmetric=*/false, 0);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    const RowMatrixF weight = Eigen::Map<const RowMatrixF>(
        unpacked->weight.data(), unpacked->rows, unpacked->cols);
    EXPECT_EQ(weight, layer.layer.dequantized) << layer.name;
  }
}

TEST_F(BlockTaskTest, AwqFoldsInverseScalesIntoTheProducingOps) {
  Recipe recipe =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  recipe.bits = 8;  // Nearly lossless, so the fold's effect is visible.
  recipe.awq_alpha_grid = {0.5};
  const BlockTaskOutput out = Run(recipe);
  const LayerResult& q = out.layers[0];
  ASSERT_TRUE(q.choices.awq_alpha.has_value());
  EXPECT_EQ(q.awq_fold, "input_layernorm");
  EXPECT_EQ(out.layers[4].awq_fold, "post_attention_layernorm");
  EXPECT_EQ(out.layers[6].awq_fold, "up_proj");
  EXPECT_EQ(out.layers[5].absorbed_awq_scales_of, "down_proj");
  // Grouped-query attention: no op can absorb o_proj's scales.
  EXPECT_NE(out.layers[3].awq_fold.find("grouped-query"), std::string::npos);
  EXPECT_FLOAT_EQ(*out.layers[3].choices.awq_alpha, 0.0f);
  EXPECT_NE(out.effective.input_norm, input_.weights.input_norm);

  // The folded block computes what the unquantized one does, up to 8-bit
  // rounding; without the folds the same quantized weights are far off.
  const RowMatrixF reference = RunBlockWith(input_.weights, input_.calibration);
  const double folded = RelativeDifference(
      RunBlockWith(out.effective, input_.calibration), reference);
  BlockWeights unfolded = out.effective;
  unfolded.input_norm = input_.weights.input_norm;
  unfolded.post_attention_norm = input_.weights.post_attention_norm;
  const double without =
      RelativeDifference(RunBlockWith(unfolded, input_.calibration), reference);
  EXPECT_LT(folded, 0.01);
  EXPECT_GT(without, 10 * folded);
}

// The block read and written a chunk of sequences at a time: from files
// (spilled activations) it gives exactly what it gives from memory with the
// same chunks, and chunks change the result only by the order of the
// Hessian sums. AWQ (mean |x| and α search from the Hessian) and GPTQ with
// damp: auto (the validation split counted across chunks) both.
TEST_F(BlockTaskTest, ChunksFromFilesEqualChunksInMemory) {
  Recipe awq = SmallRecipe(QuantMethod::kAwq, 32, OutputFormat::kGptq,
                           Propagation::kSequential);
  Recipe gptq =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  gptq.damp.automatic = true;
  for (const Recipe* recipe : {&awq, &gptq}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    const BlockTaskOutput whole = Run(*recipe);  // 512 tokens: one chunk.
    ASSERT_FALSE(whole.layers.empty());
    BlockTaskInput chunked = input_;
    chunked.chunk_tokens = 128;  // Chunks of two 64-token windows.
    auto in_memory = RunBlockTask(chunked);
    ASSERT_TRUE(in_memory.ok()) << in_memory.status();

    const std::string dir = testing::MakeTempDir();
    ASSERT_TRUE(
        WriteHiddenStates(dir + "/cal.safetensors", input_.calibration).ok());
    ASSERT_TRUE(
        WriteHiddenStates(dir + "/held.safetensors", input_.heldout).ok());
    auto cal_file = HiddenStateFile::Open(dir + "/cal.safetensors");
    auto held_file = HiddenStateFile::Open(dir + "/held.safetensors");
    ASSERT_TRUE(cal_file.ok() && held_file.ok());
    auto cal_out = HiddenStateFileWriter::Create(
        dir + "/cal-out.safetensors", input_.calibration.seq_len,
        input_.calibration.lengths, input_.calibration.rows.cols());
    auto held_out = HiddenStateFileWriter::Create(
        dir + "/held-out.safetensors", input_.heldout.seq_len,
        input_.heldout.lengths, input_.heldout.rows.cols());
    ASSERT_TRUE(cal_out.ok() && held_out.ok());
    BlockTaskInput from_files = chunked;
    from_files.calibration = HiddenStates();
    from_files.heldout = HiddenStates();
    from_files.calibration_source = cal_file->get();
    from_files.heldout_source = held_file->get();
    from_files.calibration_sink = cal_out->get();
    from_files.heldout_sink = held_out->get();
    auto streamed = RunBlockTask(from_files);
    ASSERT_TRUE(streamed.ok()) << streamed.status();

    ASSERT_EQ(streamed->tensors.size(), in_memory->tensors.size());
    for (size_t i = 0; i < streamed->tensors.size(); ++i) {
      EXPECT_EQ(streamed->tensors[i].bytes, in_memory->tensors[i].bytes)
          << streamed->tensors[i].name;
    }
    for (size_t i = 0; i < streamed->layers.size(); ++i) {
      const LayerAudit& a = streamed->layers[i].audit;
      const LayerAudit& b = in_memory->layers[i].audit;
      EXPECT_EQ(a.method_heldout.relative_error,
                b.method_heldout.relative_error);
      EXPECT_EQ(a.method_calibration.relative_error,
                b.method_calibration.relative_error);
      EXPECT_EQ(streamed->layers[i].choices.damp_used,
                in_memory->layers[i].choices.damp_used);
      EXPECT_EQ(streamed->layers[i].choices.awq_alpha,
                in_memory->layers[i].choices.awq_alpha);
      // Against one chunk: the same choices, errors equal to rounding.
      const LayerAudit& w = whole.layers[i].audit;
      EXPECT_NEAR(b.method_heldout.relative_error,
                  w.method_heldout.relative_error,
                  1e-4 * w.method_heldout.relative_error + 1e-7)
          << whole.layers[i].name;
      EXPECT_EQ(in_memory->layers[i].choices.awq_alpha,
                whole.layers[i].choices.awq_alpha);
    }
    EXPECT_TRUE(streamed->calibration_out.lengths.empty());
    EXPECT_EQ(ReadHiddenStates(dir + "/cal-out.safetensors")->rows,
              in_memory->calibration_out.rows);
    EXPECT_EQ(ReadHiddenStates(dir + "/held-out.safetensors")->rows,
              in_memory->heldout_out.rows);
    EXPECT_LT(RelativeDifference(in_memory->calibration_out.rows,
                                 whole.calibration_out.rows),
              1e-4);
  }
}

// Several threads: chunks through the forward pass side by side, the
// group's layers side by side. Every output byte is the one-thread result.
TEST_F(BlockTaskTest, ThreadsGiveTheSameBytes) {
  Recipe gptq = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                            Propagation::kSequential);
  gptq.damp.automatic = true;
  Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  for (const Recipe* recipe : {&gptq, &awq}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    Run(*recipe);
    BlockTaskInput input = input_;
    input.chunk_tokens = 64;  // 8 chunks: 3 rounds on 3 threads, 2 on 5.
    auto one = RunBlockTask(input);
    ASSERT_TRUE(one.ok()) << one.status();
    for (int threads : {3, 5}) {
      SCOPED_TRACE(threads);
      input.threads = threads;
      auto many = RunBlockTask(input);
      ASSERT_TRUE(many.ok()) << many.status();
      ASSERT_EQ(many->tensors.size(), one->tensors.size());
      for (size_t i = 0; i < one->tensors.size(); ++i) {
        EXPECT_EQ(many->tensors[i].bytes, one->tensors[i].bytes)
            << one->tensors[i].name;
      }
      ASSERT_EQ(many->layers.size(), one->layers.size());
      for (size_t i = 0; i < one->layers.size(); ++i) {
        const LayerAudit& a = many->layers[i].audit;
        const LayerAudit& b = one->layers[i].audit;
        EXPECT_EQ(a.method_heldout.relative_error,
                  b.method_heldout.relative_error);
        EXPECT_EQ(a.rtn_heldout.relative_error, b.rtn_heldout.relative_error);
        EXPECT_EQ(many->layers[i].choices.damp_used,
                  one->layers[i].choices.damp_used);
        EXPECT_EQ(many->layers[i].choices.awq_alpha,
                  one->layers[i].choices.awq_alpha);
      }
      EXPECT_EQ(many->calibration_out.rows, one->calibration_out.rows);
      EXPECT_EQ(many->heldout_out.rows, one->heldout_out.rows);
    }
  }
  input_.threads = 0;
  EXPECT_EQ(RunBlockTask(input_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Sequential blocks keep what later groups reuse (the attention context,
// the residual stream, the MLP's hidden state): in memory, in files, or
// not at all (each group recomputed from the block input) give the same
// bytes, also when AWQ folds o_proj's and down_proj's scales into v_proj
// and up_proj after their outputs were kept. The files go, as they came.
TEST_F(BlockTaskTest, KeptActivationsInMemoryFilesOrRecomputedGiveOneResult) {
  Recipe gptq = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                            Propagation::kSequential);
  Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  awq.awq_alpha_grid = {0.25, 0.5};
  for (const Recipe* recipe : {&gptq, &awq}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    Run(*recipe);
    ModelConfig config = loaded_.model->config();
    BlockTaskInput input = input_;
    testing::ToMultiHead(&config, &input.weights);
    input.config = &config;
    input.chunk_tokens = 64;
    auto memory = RunBlockTask(input);
    ASSERT_TRUE(memory.ok()) << memory.status();
    if (recipe == &awq) {
      EXPECT_EQ(memory->layers[3].awq_fold, "v_proj");
      EXPECT_EQ(memory->layers[6].awq_fold, "up_proj");
    }

    const std::string dir = testing::MakeTempDir();
    testing::FaultInjectingFileSystem fs;
    input.stash_dir = dir;
    input.max_stash_bytes = 0;
    input.file_system = &fs;
    auto files = RunBlockTask(input);
    ASSERT_TRUE(files.ok()) << files.status();
    EXPECT_GT(fs.bytes_written(),
              BlockStashBytes(config, input.calibration.rows.rows()));
    EXPECT_TRUE(testing::DirectoryEntries(dir).empty());

    input.stash_dir.clear();
    input.file_system = FileSystem::Default();
    auto recomputed = RunBlockTask(input);
    ASSERT_TRUE(recomputed.ok()) << recomputed.status();

    for (const BlockTaskOutput* other : {&*files, &*recomputed}) {
      ASSERT_EQ(other->tensors.size(), memory->tensors.size());
      for (size_t i = 0; i < memory->tensors.size(); ++i) {
        EXPECT_EQ(other->tensors[i].bytes, memory->tensors[i].bytes)
            << memory->tensors[i].name;
      }
      for (size_t i = 0; i < memory->layers.size(); ++i) {
        EXPECT_EQ(other->layers[i].audit.method_heldout.relative_error,
                  memory->layers[i].audit.method_heldout.relative_error);
        EXPECT_EQ(other->layers[i].choices.awq_alpha,
                  memory->layers[i].choices.awq_alpha);
      }
      EXPECT_EQ(other->calibration_out.rows, memory->calibration_out.rows);
      EXPECT_EQ(other->heldout_out.rows, memory->heldout_out.rows);
    }
  }
}

// A full disk while keeping activations fails the task and leaves nothing.
TEST_F(BlockTaskTest, FullDiskWhileKeepingActivationsLeavesNothing) {
  Recipe recipe = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                              Propagation::kSequential);
  Run(recipe);
  BlockTaskInput input = input_;
  const std::string dir = testing::MakeTempDir();
  testing::FaultInjectingFileSystem fs;
  fs.SetDiskFullAfter(100'000);
  input.stash_dir = dir;
  input.max_stash_bytes = 0;
  input.file_system = &fs;
  auto out = RunBlockTask(input);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted)
      << out.status();
  EXPECT_TRUE(testing::DirectoryEntries(dir).empty());
}

TEST_F(BlockTaskTest, RefusesHiddenStatesOfTheWrongShape) {
  Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  auto loaded = LoadStories260K(recipe);
  ASSERT_TRUE(loaded.ok());
  auto input = Block0Input(*loaded, recipe);
  ASSERT_TRUE(input.ok());
  input->recipe = &recipe;
  input->heldout.lengths.push_back(3);  // One more sequence than rows.
  auto out = RunBlockTask(*input);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("held-out"), std::string::npos)
      << out.status();
  input = Block0Input(*loaded, recipe);
  input->recipe = &recipe;
  input->settings.erase(LayerType::kUpProj);
  out = RunBlockTask(*input);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("mlp.up_proj"), std::string::npos);
}

}  // namespace
}  // namespace quant
