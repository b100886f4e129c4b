// Shared setup for the pipeline tests: stories260K from ../shared, its
// tokenizer, a small calibration split of TinyStories text, and recipes.
#ifndef QUANT_TESTS_PIPELINE_PIPELINE_FIXTURE_H_
#define QUANT_TESTS_PIPELINE_PIPELINE_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_split.h"
#include "core/forward/llama_model.h"
#include "core/model/checkpoint.h"
#include "core/model/model_config.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/local_pipeline.h"
#include "core/recipe/recipe.h"
#include "core/text/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant::testing {

std::string Stories260KDir();   // .../models/stories260K/hf-f32
std::string TinyStoriesPath();  // .../data/tinystories_val.txt

// A test on stories260K and its calibration text: skips (fails under CI)
// when ../shared lacks them, and gives each test a fresh temp_ directory.
// A fixture that extends SetUp calls this one first and returns when
// IsSkipped() or HasFatalFailure().
class SharedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(Stories260KDir());
    QUANT_REQUIRE_SHARED(TinyStoriesPath());
    temp_ = MakeTempDir();
  }
  std::string temp_;
};

// A local run of stories260K on its TinyStories text with `recipe`, into
// `out_dir`.
LocalQuantizeOptions Stories260KOptions(const Recipe& recipe,
                                        const std::string& out_dir);

// A Llama config for planning tests (no weights): hidden 256, MLP 512, 2
// blocks, 4 heads over 2 KV heads.
ModelConfig TwoBlockConfig();

// A recipe small enough for sanitizer builds: `samples` windows of
// `seq_len` tokens, 10% of the documents held out.
Recipe SmallRecipe(QuantMethod method, int group_size, OutputFormat format,
                   Propagation propagation, int samples = 8, int seq_len = 64);

// The model, its checkpoint and a split built from `recipe`.
struct LoadedModel {
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  CalibrationSplit split;
};
absl::StatusOr<LoadedModel> LoadStories260K(const Recipe& recipe);

// Block 0's task input for `recipe` (every layer's settings from the
// recipe's plan, hidden states = the split's embeddings).
absl::StatusOr<BlockTaskInput> Block0Input(const LoadedModel& loaded,
                                           const Recipe& recipe);

// Every KV head its own copy: the same attention as grouped-query
// stories260K, but o_proj's AWQ scales can be folded into v_proj.
void ToMultiHead(ModelConfig* config, BlockWeights* weights);

// The file's bytes; "" (and a test failure) when it cannot be read.
std::string ReadOrEmpty(const std::string& path);

// A block's layers.json in `dir` without the measured times (keys ending
// in "seconds"), which differ by run.
nlohmann::json LayersWithoutTimes(const std::string& dir, int block);

// Counts the blocks a local run computed and the ones it found published
// in its work directory, and keeps the stages it reported.
class CountingObserver : public PipelineObserver {
 public:
  void OnBlockStart(int, int) override { ++computed; }
  void OnBlockResumed(int, int) override { ++resumed; }
  void OnStage(const std::string& what) override { stages.push_back(what); }
  int computed = 0;
  int resumed = 0;
  std::vector<std::string> stages;
};

}  // namespace quant::testing

#endif  // QUANT_TESTS_PIPELINE_PIPELINE_FIXTURE_H_
