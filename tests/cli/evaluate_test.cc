// core/eval/evaluate: the token stream, the windows, and the evaluation loop
// behind `quantctl eval` (and the release gates), in process on stories260K.
#include "core/eval/evaluate.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/file_util.h"
#include "core/calib/calibration_file.h"
#include "core/eval/greedy_continuation.h"
#include "core/forward/llama_model.h"
#include "core/model/checkpoint.h"
#include "core/text/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CutIntoWindowsTest, KeepsAndPadsTheFinalPartialWindow) {
  const std::vector<int32_t> stream = {10, 11, 12, 13, 14, 15, 16};
  const TokenWindows windows = CutIntoWindows(stream, 3, /*pad_id=*/2);
  EXPECT_EQ(windows.seq_len, 3);
  ASSERT_EQ(windows.sequences.size(), 3u);
  EXPECT_THAT(windows.sequences[0], ElementsAre(10, 11, 12));
  EXPECT_THAT(windows.sequences[1], ElementsAre(13, 14, 15));
  EXPECT_THAT(windows.sequences[2], ElementsAre(16, 2, 2));
  EXPECT_THAT(windows.lengths, ElementsAre(3, 3, 1));
  EXPECT_EQ(windows.RealTokens(), 7);
}

TEST(CutIntoWindowsTest, ExactMultipleHasNoPartialWindow) {
  const std::vector<int32_t> stream = {1, 2, 3, 4};
  const TokenWindows windows = CutIntoWindows(stream, 2, 0);
  ASSERT_EQ(windows.sequences.size(), 2u);
  EXPECT_THAT(windows.lengths, ElementsAre(2, 2));
  EXPECT_TRUE(CutIntoWindows({}, 4, 0).sequences.empty());
}

class EvaluateTest : public ::testing::Test {
 protected:
  void LoadStories260K() {
    auto tokenizer = Tokenizer::LoadFromDirectory(f32_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    auto checkpoint = Checkpoint::Open(f32_);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    auto model = LlamaModel::Load(**checkpoint);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  const std::string f32_ =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  const std::string tinystories_ =
      quant::testing::SharedPath("data/tinystories_val.txt");
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LlamaModel> model_;
};

TEST(MakeEvaluationWindowsTest, PerDocumentOrConcatenated) {
  const std::vector<std::vector<int32_t>> documents = {{1, 5, 6, 7, 8}, {1, 9}};
  const TokenWindows own =
      MakeEvaluationWindows(documents, 3, WindowPacking::kPerDocument, 0);
  ASSERT_EQ(own.sequences.size(), 3u);
  EXPECT_THAT(own.sequences[0], ElementsAre(1, 5, 6));
  EXPECT_THAT(own.sequences[1], ElementsAre(7, 8, 0));
  EXPECT_THAT(own.sequences[2], ElementsAre(1, 9, 0));
  EXPECT_THAT(own.lengths, ElementsAre(3, 2, 2));

  const TokenWindows joined =
      MakeEvaluationWindows(documents, 3, WindowPacking::kConcatenate, 0);
  ASSERT_EQ(joined.sequences.size(), 3u);
  EXPECT_THAT(joined.sequences[1], ElementsAre(7, 8, 1));
  EXPECT_THAT(joined.sequences[2], ElementsAre(9, 0, 0));
  EXPECT_THAT(joined.lengths, ElementsAre(3, 3, 1));
}

TEST_F(EvaluateTest, TokenizeDocumentsPutsBosBeforeEachStrippedText) {
  QUANT_REQUIRE_SHARED(f32_);
  LoadStories260K();
  // Plain text keeps a paragraph's trailing space; evaluation strips it.
  auto file = ParseCalibrationFile("Once upon a time \n\nThe cat sat.\n");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->documents[0].text, "Once upon a time ");
  ASSERT_TRUE(tokenizer_->bos_id().has_value());
  const int32_t bos = *tokenizer_->bos_id();
  const std::vector<int32_t> first_body =
      tokenizer_->Encode("Once upon a time", false).value();
  const std::vector<int32_t> second_body =
      tokenizer_->Encode("The cat sat.", false).value();
  std::vector<int32_t> first = {bos};
  first.insert(first.end(), first_body.begin(), first_body.end());
  std::vector<int32_t> second = {bos};
  second.insert(second.end(), second_body.begin(), second_body.end());

  TextEvaluationOptions options;
  options.max_documents = 1;
  auto one = TokenizeDocuments(*file, *tokenizer_, options);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, ElementsAre(first));

  options.max_documents = 0;
  auto both = TokenizeDocuments(*file, *tokenizer_, options);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(*both, ElementsAre(first, second));
  // More documents asked for than the file has: all of them.
  options.max_documents = 50;
  auto many = TokenizeDocuments(*file, *tokenizer_, options);
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(*many, *both);

  options.max_documents = 0;
  options.add_bos = false;
  options.strip_whitespace = false;
  auto raw = TokenizeDocuments(*file, *tokenizer_, options);
  ASSERT_TRUE(raw.ok());
  ASSERT_EQ(raw->size(), 2u);
  EXPECT_EQ((*raw)[0], tokenizer_->Encode("Once upon a time ", false).value());
  EXPECT_NE((*raw)[0], std::vector<int32_t>(first.begin() + 1, first.end()));

  options.max_documents = -1;
  EXPECT_FALSE(TokenizeDocuments(*file, *tokenizer_, options).ok());
}

TEST_F(EvaluateTest, TokenizeDocumentsChecksInputIds) {
  QUANT_REQUIRE_SHARED(f32_);
  LoadStories260K();
  auto file = ParseCalibrationFile(
      "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 100000]}\n");
  ASSERT_TRUE(file.ok()) << file.status();
  TextEvaluationOptions options;
  options.max_documents = 1;
  auto first = TokenizeDocuments(*file, *tokenizer_, options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(*first, ElementsAre(ElementsAre(1, 2, 3)));  // No BOS added.
  options.max_documents = 0;
  auto all = TokenizeDocuments(*file, *tokenizer_, options);
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(),
              HasSubstr("line 2: \"input_ids\"[1] = 100000 is outside"));
}

TEST_F(EvaluateTest, ReproducesLlama2cReferenceNll) {
  const std::string reference_path =
      quant::testing::SharedPath("models/stories260K/reference.json");
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  QUANT_REQUIRE_SHARED(reference_path);
  LoadStories260K();
  const auto reference = nlohmann::json::parse(
      ReadFileToString(reference_path).value_or(""), nullptr, false);
  ASSERT_FALSE(reference.is_discarded());
  auto file = LoadCalibrationFile(tinystories_);
  ASSERT_TRUE(file.ok()) << file.status();

  TextEvaluationOptions options;
  options.seq_len = 256;
  options.max_documents = 300;
  auto evaluation = EvaluateText(*model_, nullptr, *tokenizer_, *file, options);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  const NextTokenMetrics& m = evaluation->metrics;
  EXPECT_NEAR(m.quantized_nll,
              reference.at("mean_nll_first300_paragraphs").get<double>(), 1e-4);
  // The reference's token count is the positions it scored.
  EXPECT_EQ(m.tokens, reference.at("tokens_first300").get<int64_t>());
  EXPECT_EQ(evaluation->documents, 300);
  EXPECT_GE(evaluation->windows, 300);
  EXPECT_EQ(m.tokens, evaluation->input_tokens - evaluation->windows);
  // Without a reference the model stands on both sides.
  EXPECT_EQ(m.reference_nll, m.quantized_nll);
  EXPECT_EQ(m.top1_agreement, 1.0);
}

TEST_F(EvaluateTest, BatchingAndPackingKeepTheTokens) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  LoadStories260K();
  auto file = LoadCalibrationFile(tinystories_);
  ASSERT_TRUE(file.ok()) << file.status();
  TextEvaluationOptions options;
  options.seq_len = 256;
  options.max_documents = 40;
  auto batched = EvaluateText(*model_, nullptr, *tokenizer_, *file, options);
  ASSERT_TRUE(batched.ok()) << batched.status();
  const NextTokenMetrics& m = batched->metrics;

  // Windows of different lengths share a forward call: no effect.
  options.batch_windows = 1;
  auto one_by_one = EvaluateText(*model_, nullptr, *tokenizer_, *file, options);
  ASSERT_TRUE(one_by_one.ok()) << one_by_one.status();
  EXPECT_EQ(one_by_one->metrics.tokens, m.tokens);
  EXPECT_NEAR(one_by_one->metrics.quantized_nll, m.quantized_nll, 1e-6);

  // Concatenated: the same tokens, fewer windows, context across documents.
  options.batch_windows = 8;
  options.packing = WindowPacking::kConcatenate;
  auto concatenated =
      EvaluateText(*model_, nullptr, *tokenizer_, *file, options);
  ASSERT_TRUE(concatenated.ok()) << concatenated.status();
  EXPECT_EQ(concatenated->input_tokens, batched->input_tokens);
  EXPECT_EQ(concatenated->windows,
            (batched->input_tokens + options.seq_len - 1) / options.seq_len);
  EXPECT_LT(concatenated->windows, batched->windows);
  EXPECT_EQ(concatenated->metrics.tokens,
            concatenated->input_tokens - concatenated->windows);
  EXPECT_NE(concatenated->metrics.quantized_nll, m.quantized_nll);
  EXPECT_NEAR(concatenated->metrics.quantized_nll, m.quantized_nll, 0.05);
}

TEST_F(EvaluateTest, PaddingDoesNotLeakIntoRealPositions) {
  QUANT_REQUIRE_SHARED(f32_);
  LoadStories260K();
  const std::vector<int32_t> short_doc =
      tokenizer_->Encode("Once upon a time, there was a cat.", true).value();
  const std::vector<int32_t> long_doc =
      tokenizer_
          ->Encode(
              "The little girl went to the park. She saw a big red ball and "
              "she "
              "wanted to play with it all day long.",
              true)
          .value();
  ASSERT_GT(long_doc.size(), short_doc.size() + 5);
  // In one batch the short window runs padded to the long one's length.
  auto windows_padded_with = [&](int32_t pad_id) {
    return MakeEvaluationWindows({short_doc, long_doc}, 64,
                                 WindowPacking::kPerDocument, pad_id);
  };
  auto batched_a = EvaluateWindows(*model_, nullptr, windows_padded_with(0), 2);
  auto batched_b =
      EvaluateWindows(*model_, nullptr, windows_padded_with(300), 2);
  auto separate = EvaluateWindows(*model_, nullptr, windows_padded_with(0), 1);
  ASSERT_TRUE(batched_a.ok() && batched_b.ok() && separate.ok());
  EXPECT_EQ(batched_a->tokens,
            static_cast<int64_t>(short_doc.size() + long_doc.size()) - 2);
  EXPECT_EQ(separate->tokens, batched_a->tokens);
  EXPECT_NEAR(batched_a->quantized_nll, separate->quantized_nll, 1e-6);
  EXPECT_NEAR(batched_b->quantized_nll, separate->quantized_nll, 1e-6);
}

TEST_F(EvaluateTest, ModelAgainstItselfHasNoDivergence) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  LoadStories260K();
  auto file = LoadCalibrationFile(tinystories_);
  ASSERT_TRUE(file.ok()) << file.status();
  TextEvaluationOptions options;
  options.seq_len = 128;
  options.max_documents = 10;
  auto evaluation =
      EvaluateText(*model_, model_.get(), *tokenizer_, *file, options);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  const NextTokenMetrics& m = evaluation->metrics;
  EXPECT_GT(m.tokens, 0);
  EXPECT_NEAR(m.mean_kl, 0.0, 1e-9);
  EXPECT_EQ(m.top1_agreement, 1.0);
  EXPECT_NEAR(m.ppl_ratio, 1.0, 1e-12);
}

TEST_F(EvaluateTest, RejectsWindowsItCannotScore) {
  QUANT_REQUIRE_SHARED(f32_);
  LoadStories260K();
  // Longer than the model's positions.
  const std::vector<int32_t> ids(600, 5);
  auto too_long =
      EvaluateWindows(*model_, nullptr, CutIntoWindows(ids, 600, 0));
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.status().message(),
              HasSubstr("seq_len 600 exceeds the model's "
                        "max_position_embeddings 512"));
  // Nothing to score: one token.
  auto single = EvaluateWindows(*model_, nullptr, CutIntoWindows({1}, 8, 0));
  ASSERT_FALSE(single.ok());
  EXPECT_THAT(single.status().message(), HasSubstr("no position to score"));
  // No windows at all.
  auto empty = EvaluateWindows(*model_, nullptr, TokenWindows{});
  EXPECT_FALSE(empty.ok());
  // Bad options.
  auto file = ParseCalibrationFile("Once upon a time\n");
  ASSERT_TRUE(file.ok());
  TextEvaluationOptions options;
  options.seq_len = 1;
  auto short_window =
      EvaluateText(*model_, nullptr, *tokenizer_, *file, options);
  ASSERT_FALSE(short_window.ok());
  EXPECT_THAT(short_window.status().message(),
              HasSubstr("seq_len must be at least 2, got 1"));
  auto zero_batch =
      EvaluateWindows(*model_, nullptr, CutIntoWindows({1, 2, 3}, 3, 0), 0);
  EXPECT_FALSE(zero_batch.ok());
}

TEST_F(EvaluateTest, GreedyContinuationReproducesLlama2cAndComparesSideBySide) {
  QUANT_REQUIRE_SHARED(f32_);
  LoadStories260K();
  auto text = ReadFileToString(
      quant::testing::SharedPath("models/stories260K/reference.json"));
  ASSERT_TRUE(text.ok());
  const nlohmann::json reference = nlohmann::json::parse(*text);
  const std::vector<int32_t> expected = reference["greedy_from_bos_64"];
  const std::vector<int32_t> prompt = {expected[0]};
  auto ids = GreedyContinue(
      *model_, prompt, static_cast<int>(expected.size()) - 1, std::nullopt);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, std::vector<int32_t>(expected.begin() + 1, expected.end()));
  EXPECT_FALSE(GreedyContinue(*model_, {}, 4, std::nullopt).ok());
  EXPECT_FALSE(GreedyContinue(*model_, prompt, 100000, std::nullopt).ok());

  // Against itself every token agrees.
  auto compared = CompareContinuations(*model_, model_.get(), *tokenizer_,
                                       {"Once upon a time"}, 12);
  ASSERT_TRUE(compared.ok()) << compared.status();
  ASSERT_EQ(compared->size(), 1u);
  const ContinuationComparison& c = (*compared)[0];
  EXPECT_EQ(c.ids.size(), 12u);
  EXPECT_EQ(c.agreeing_prefix, 12);
  EXPECT_EQ(c.text, c.reference_text);
  EXPECT_THAT(c.text, HasSubstr("there was a little girl"));
}

TEST_F(EvaluateTest, MaxWindowsAndProgressCoverWhatIsEvaluated) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  LoadStories260K();
  auto file = LoadCalibrationFile(tinystories_);
  ASSERT_TRUE(file.ok());
  TextEvaluationOptions options;
  options.max_documents = 40;
  options.max_windows = 10;
  options.batch_windows = 4;
  std::vector<std::pair<int, int>> calls;
  options.progress = [&](int done, int total) {
    calls.emplace_back(done, total);
  };
  auto evaluation = EvaluateText(*model_, nullptr, *tokenizer_, *file, options);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  EXPECT_EQ(evaluation->windows, 10);
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(10, 10));
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].first, calls[i - 1].first);
  }
  options.max_windows = -1;
  EXPECT_FALSE(
      EvaluateText(*model_, nullptr, *tokenizer_, *file, options).ok());
}

}  // namespace
}  // namespace quant
