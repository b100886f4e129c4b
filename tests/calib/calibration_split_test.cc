// Tests for the calibration / held-out split and windowing, with the real
// stories260K tokenizer.
#include "core/calib/calibration_split.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

class CalibrationSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::SharedPath("models/stories260K/hf-f32");
    QUANT_REQUIRE_SHARED(dir);
    auto tokenizer = Tokenizer::LoadFromDirectory(dir);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    std::string bytes;
    for (int i = 0; i < 40; ++i) {
      absl::StrAppend(&bytes, "Story number ", i,
                      ". Once upon a time there was a cat.\n\n");
    }
    auto file = ParseCalibrationFile(bytes);
    ASSERT_TRUE(file.ok());
    file_ = *file;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  CalibrationFile file_;
};

TEST_F(CalibrationSplitTest, SplitIsDeterministicAndDisjoint) {
  CalibrationSplitOptions options;
  options.samples = 4;
  options.seq_len = 16;
  options.heldout_fraction = 0.25;
  options.seed = 7;
  auto a = BuildCalibrationSplit(file_, *tokenizer_, options);
  auto b = BuildCalibrationSplit(file_, *tokenizer_, options);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  EXPECT_EQ(a->heldout_documents, b->heldout_documents);
  EXPECT_EQ(a->calibration.sequences, b->calibration.sequences);
  EXPECT_EQ(a->heldout_documents.size(), 10u);
  EXPECT_EQ(a->calibration_documents.size(), 30u);
  std::set<int> all(a->heldout_documents.begin(), a->heldout_documents.end());
  all.insert(a->calibration_documents.begin(), a->calibration_documents.end());
  EXPECT_EQ(all.size(), 40u);  // Disjoint and complete.

  options.seed = 8;
  auto c = BuildCalibrationSplit(file_, *tokenizer_, options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->heldout_documents, c->heldout_documents);
}

TEST_F(CalibrationSplitTest, ConcatenatedWindowsStartDocumentsWithBos) {
  CalibrationSplitOptions options;
  options.samples = 3;
  options.seq_len = 32;
  options.heldout_count = 5;
  options.heldout_samples = 2;
  auto split = BuildCalibrationSplit(file_, *tokenizer_, options);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->calibration.sequences.size(), 3u);
  ASSERT_EQ(split->heldout.sequences.size(), 2u);
  for (const auto& seq : split->calibration.sequences) {
    EXPECT_EQ(seq.size(), 32u);
  }
  EXPECT_EQ(split->calibration.RealTokens(), 3 * 32);
  // The first window begins with the first calibration document, BOS first,
  // then that document's own tokens.
  const int first = split->calibration_documents[0];
  std::vector<int32_t> expected = {*tokenizer_->bos_id()};
  const auto body =
      tokenizer_
          ->Encode(absl::StripAsciiWhitespace(file_.documents[first].text),
                   false)
          .value();
  expected.insert(expected.end(), body.begin(), body.end());
  const auto& window = split->calibration.sequences[0];
  ASSERT_LT(expected.size(), window.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), window.begin()));
  EXPECT_EQ(window[expected.size()], *tokenizer_->bos_id());
}

TEST_F(CalibrationSplitTest, PerDocumentSequencesArePaddedAndRecordLengths) {
  CalibrationSplitOptions options;
  options.samples = 5;
  options.seq_len = 64;
  options.heldout_fraction = 0;
  options.packing = WindowPacking::kPerDocument;
  auto split = BuildCalibrationSplit(file_, *tokenizer_, options);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->calibration.sequences.size(), 5u);
  EXPECT_TRUE(split->heldout.sequences.empty());
  for (size_t i = 0; i < 5; ++i) {
    const int length = split->calibration.lengths[i];
    EXPECT_GT(length, 5);
    EXPECT_LT(length, 64);
    const auto& seq = split->calibration.sequences[i];
    EXPECT_EQ(seq[0], *tokenizer_->bos_id());
    EXPECT_EQ(seq[length], *tokenizer_->eos_id());  // Padding.
  }
}

TEST_F(CalibrationSplitTest, TooFewTokensForOneWindow) {
  CalibrationSplitOptions options;
  options.seq_len = 100000;
  auto split = BuildCalibrationSplit(file_, *tokenizer_, options);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("fewer than one window"),
            std::string::npos)
      << split.status();
}

TEST_F(CalibrationSplitTest, IdsOutsideVocabularyNameLineAndIndex) {
  auto file = ParseCalibrationFile(
      "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [1, 9999]}\n"
      "{\"input_ids\": [1, 2, 3]}\n");
  ASSERT_TRUE(file.ok());
  CalibrationSplitOptions options;
  options.seq_len = 2;
  options.heldout_fraction = 0;
  auto split = BuildCalibrationSplit(*file, *tokenizer_, options);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("line 2: \"input_ids\"[1] = 9999"),
            std::string::npos)
      << split.status();
}

TEST_F(CalibrationSplitTest, BadOptionsAreNamed) {
  CalibrationSplitOptions options;
  options.samples = 0;
  EXPECT_NE(BuildCalibrationSplit(file_, *tokenizer_, options)
                .status()
                .message()
                .find("calibration.samples"),
            std::string::npos);
  options = CalibrationSplitOptions();
  options.heldout_fraction = 1.5;
  EXPECT_NE(BuildCalibrationSplit(file_, *tokenizer_, options)
                .status()
                .message()
                .find("heldout_fraction"),
            std::string::npos);
  options = CalibrationSplitOptions();
  options.heldout_count = 40;
  EXPECT_FALSE(BuildCalibrationSplit(file_, *tokenizer_, options).ok());
}

}  // namespace
}  // namespace quant
