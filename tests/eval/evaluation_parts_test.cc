// Evaluation parts: merged in batch order they add exactly what one
// accumulator adds; their files round-trip and refuse what they cannot hold.
// (Scoring real checkpoints in parts: tests/cli/eval_packed_checkpoint_test.)
#include "core/eval/evaluation_parts.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/io/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

// Scores whose sums depend on their order in double (values of very
// different magnitudes).
std::vector<NextTokenScore> Scores(int count, int seed) {
  std::vector<NextTokenScore> scores;
  for (int i = 0; i < count; ++i) {
    const double x = std::pow(10.0, (i * 7 + seed) % 17 - 8) * (1 + i % 3);
    scores.push_back({true, (i + seed) % 2 == 0, x, x * 1.5 + 1e-3, x / 3});
  }
  return scores;
}

EvaluationPart Part(int64_t first, int64_t count, int seed) {
  EvaluationPart part;
  part.first_batch = first;
  part.batch_count = count;
  part.total_batches = 5;
  part.scores = {Scores(40 * static_cast<int>(count), seed),
                 Scores(40 * static_cast<int>(count), seed + 1)};
  return part;
}

class EvaluationPartsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const EvaluationPart& part) {
    const std::string path = JoinPath(dir_, name);
    EXPECT_TRUE(WriteEvaluationPart(path, part).ok());
    return path;
  }
  // A part file with `tensors` and `metadata` as given.
  std::string WriteRaw(const std::string& name,
                       const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    const std::string path = JoinPath(dir_, name);
    EXPECT_TRUE(WriteSafetensors(path, tensors, metadata).ok());
    return path;
  }
  std::string dir_ = testing::MakeTempDir();
};

TEST_F(EvaluationPartsTest, MergedInBatchOrderAddLikeOneAccumulator) {
  const std::vector<EvaluationPart> parts = {Part(0, 2, 1), Part(2, 1, 2),
                                             Part(3, 2, 3)};
  std::vector<NextTokenMetricsAccumulator> whole(2);
  for (const EvaluationPart& part : parts) {
    for (size_t m = 0; m < 2; ++m) whole[m].AddScores(part.scores[m]);
  }
  // Given out of order, and read back from their files.
  std::vector<EvaluationPart> read;
  for (size_t i : {2, 0, 1}) {
    absl::StatusOr<EvaluationPart> part = ReadEvaluationPart(
        Write(absl::StrCat("part", i, ".safetensors"), parts[i]));
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(part->first_batch, parts[i].first_batch);
    EXPECT_EQ(part->batch_count, parts[i].batch_count);
    EXPECT_EQ(part->total_batches, 5);
    read.push_back(*std::move(part));
  }
  absl::StatusOr<std::vector<NextTokenMetrics>> merged =
      MergeEvaluationParts(read);
  ASSERT_TRUE(merged.ok()) << merged.status();
  for (size_t m = 0; m < 2; ++m) {
    const NextTokenMetrics expected = whole[m].Result();
    EXPECT_EQ((*merged)[m].tokens, expected.tokens);
    EXPECT_EQ((*merged)[m].reference_nll, expected.reference_nll);
    EXPECT_EQ((*merged)[m].quantized_nll, expected.quantized_nll);
    EXPECT_EQ((*merged)[m].mean_kl, expected.mean_kl);
    EXPECT_EQ((*merged)[m].top1_agreement, expected.top1_agreement);
  }
  // The same scores added in another order give other doubles: the merge
  // order is what keeps the numbers.
  NextTokenMetricsAccumulator reordered;
  for (size_t i : {2, 0, 1}) reordered.AddScores(parts[i].scores[0]);
  EXPECT_NE(reordered.Result().reference_nll, (*merged)[0].reference_nll);
}

TEST_F(EvaluationPartsTest, ReadRefusesWhatAPartCannotHold) {
  const EvaluationPart good = Part(1, 1, 4);
  const std::string good_path = Write("good.safetensors", good);
  std::vector<double> ones(40, 1.0);
  std::vector<double> with_nan = ones;
  with_nan[7] = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint8_t> agrees(40, 1);
  std::vector<uint8_t> agrees_two = agrees;
  agrees_two[3] = 2;
  auto bytes = [](const auto& v) {
    return absl::string_view(reinterpret_cast<const char*>(v.data()),
                             v.size() * sizeof(v[0]));
  };
  auto tensors = [&](absl::string_view kl, absl::string_view agree,
                     int64_t agree_rows) {
    return std::vector<TensorToWrite>{
        {"model0.reference_nll", DType::kF64, {40}, bytes(ones)},
        {"model0.quantized_nll", DType::kF64, {40}, bytes(ones)},
        {"model0.kl", DType::kF64, {40}, kl},
        {"model0.agrees", DType::kU8, {agree_rows}, agree}};
  };
  std::map<std::string, std::string> metadata = {
      {"format", "quant-evaluation-part/1"},
      {"first_batch", "0"},
      {"batch_count", "1"},
      {"total_batches", "1"},
      {"models", "1"}};
  ASSERT_TRUE(ReadEvaluationPart(
                  WriteRaw("ok.safetensors",
                           tensors(bytes(ones), bytes(agrees), 40), metadata))
                  .ok());

  struct Case {
    std::string name;
    std::string path;
    std::string error;
  };
  std::map<std::string, std::string> other_format = metadata;
  other_format["format"] = "quant-shard-statistics/1";
  std::map<std::string, std::string> past_end = metadata;
  past_end["first_batch"] = "1";
  std::map<std::string, std::string> bad_count = metadata;
  bad_count["models"] = "-2";
  std::map<std::string, std::string> two_models = metadata;
  two_models["models"] = "2";
  const std::vector<Case> cases = {
      {"nan",
       WriteRaw("nan.safetensors", tensors(bytes(with_nan), bytes(agrees), 40),
                metadata),
       "tensor model0.kl[7] is not finite"},
      {"agrees 2",
       WriteRaw("two.safetensors", tensors(bytes(ones), bytes(agrees_two), 40),
                metadata),
       "model0.agrees[3] is 2"},
      {"short column",
       WriteRaw("short.safetensors",
                tensors(bytes(ones),
                        absl::string_view(bytes(agrees)).substr(0, 39), 39),
                metadata),
       "have 40 and 39 rows"},
      {"other format",
       WriteRaw("format.safetensors", tensors(bytes(ones), bytes(agrees), 40),
                other_format),
       "not an evaluation part"},
      {"past the end",
       WriteRaw("end.safetensors", tensors(bytes(ones), bytes(agrees), 40),
                past_end),
       "batches [1, 2) of 1"},
      {"bad count",
       WriteRaw("count.safetensors", tensors(bytes(ones), bytes(agrees), 40),
                bad_count),
       "metadata models = \"-2\" is not a non-negative integer"},
      {"missing model",
       WriteRaw("models.safetensors", tensors(bytes(ones), bytes(agrees), 40),
                two_models),
       "4 tensors for 2 model(s)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<EvaluationPart> part = ReadEvaluationPart(c.path);
    ASSERT_FALSE(part.ok());
    EXPECT_THAT(part.status().message(), HasSubstr(c.error));
    EXPECT_THAT(part.status().message(), HasSubstr(c.path));
  }
  // A truncated file: the safetensors reader's error, no part.
  absl::StatusOr<std::string> whole = ReadFileToString(good_path);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::string cut = JoinPath(dir_, "cut.safetensors");
  ASSERT_TRUE(WriteFileAtomically(
                  cut, absl::string_view(*whole).substr(0, whole->size() - 9))
                  .ok());
  EXPECT_FALSE(ReadEvaluationPart(cut).ok());
}

}  // namespace
}  // namespace quant
