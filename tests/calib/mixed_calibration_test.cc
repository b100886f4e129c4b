// Tests for calibration sources mixed by weight: the shares, each source
// split on its own, and the mix's identity; with the real stories260K
// tokenizer.
#include "core/calib/mixed_calibration.h"

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShareWindowsByWeightTest, OneEachThenLargestRemainder) {
  EXPECT_THAT(*ShareWindowsByWeight(10, {1, 1}), ElementsAre(5, 5));
  // 2 given, 8 shared 3:1 = 6 + 2.
  EXPECT_THAT(*ShareWindowsByWeight(10, {3, 1}), ElementsAre(7, 3));
  // 3 given, 4 shared equally: 1.33 each, the leftover to the first.
  EXPECT_THAT(*ShareWindowsByWeight(7, {1, 1, 1}), ElementsAre(3, 2, 2));
  // A tiny weight still gets one window.
  EXPECT_THAT(*ShareWindowsByWeight(5, {1000, 0.001}), ElementsAre(4, 1));
  EXPECT_THAT(*ShareWindowsByWeight(1, {2}), ElementsAre(1));
  for (int total : {3, 4, 17, 128}) {
    const std::vector<int> shares = *ShareWindowsByWeight(total, {0.2, 0.5, 1});
    EXPECT_EQ(shares[0] + shares[1] + shares[2], total) << total;
  }

  EXPECT_THAT(ShareWindowsByWeight(1, {1, 1}).status().message(),
              HasSubstr("1 windows cannot give each of 2"));
  EXPECT_THAT(ShareWindowsByWeight(4, {1, 0}).status().message(),
              HasSubstr("calibration.sources[1].weight: 0"));
  EXPECT_THAT(ShareWindowsByWeight(4, {std::nan(""), 1}).status().message(),
              HasSubstr("calibration.sources[0].weight"));
  EXPECT_FALSE(ShareWindowsByWeight(4, {}).ok());
}

class MixedCalibrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::SharedPath("models/stories260K/hf-f32");
    QUANT_REQUIRE_SHARED(dir);
    auto tokenizer = Tokenizer::LoadFromDirectory(dir);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    cats_ = File("Story number ", " about a cat.", 40);
    dogs_ = File("Tale ", " of a dog who ran and ran far away.", 20);
  }

  static CalibrationFile File(const std::string& head, const std::string& tail,
                              int documents) {
    std::string bytes;
    for (int i = 0; i < documents; ++i) {
      absl::StrAppend(&bytes, head, i, tail, "\n\n");
    }
    return *ParseCalibrationFile(bytes);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  CalibrationFile cats_;
  CalibrationFile dogs_;
};

TEST_F(MixedCalibrationTest, EachSourceSplitOnItsOwnAndSharedByWeight) {
  CalibrationSplitOptions options;
  options.samples = 8;
  options.heldout_samples = 4;
  options.seq_len = 16;
  options.heldout_fraction = 0.25;
  options.seed = 3;
  auto mixed = BuildMixedCalibrationSplit({{&cats_, 3}, {&dogs_, 1}},
                                          *tokenizer_, options);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->sources.size(), 2u);
  const CalibrationSourceSplit& cats = mixed->sources[0];
  const CalibrationSourceSplit& dogs = mixed->sources[1];
  // 8 windows 3:1 after one each: 6 + 2; 4 held-out: 3 + 1.
  EXPECT_EQ(cats.samples, 6);
  EXPECT_EQ(dogs.samples, 2);
  EXPECT_EQ(cats.heldout_samples, 3);
  EXPECT_EQ(dogs.heldout_samples, 1);
  EXPECT_EQ(cats.sha256, cats_.sha256);
  EXPECT_EQ(dogs.weight, 1);
  // Each source's held-out documents are its own quarter.
  EXPECT_EQ(cats.heldout_documents.size(), 10u);
  EXPECT_EQ(dogs.heldout_documents.size(), 5u);
  EXPECT_EQ(cats.calibration_documents.size(), 30u);
  // The same split as each source alone with its share.
  CalibrationSplitOptions own = options;
  own.samples = 2;
  own.heldout_samples = 1;
  auto alone = BuildCalibrationSplit(dogs_, *tokenizer_, own);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(dogs.heldout_documents, alone->heldout_documents);
  // Windows: the cats' then the dogs', all of them.
  ASSERT_EQ(mixed->calibration.sequences.size(), 8u);
  ASSERT_EQ(mixed->heldout.sequences.size(), 4u);
  EXPECT_EQ(mixed->calibration.sequences[6], alone->calibration.sequences[0]);
  EXPECT_EQ(mixed->heldout.sequences[3], alone->heldout.sequences[0]);
  EXPECT_EQ(cats.calibration_windows + dogs.calibration_windows, 8);
  EXPECT_EQ(mixed->calibration.RealTokens(),
            cats.calibration_tokens + dogs.calibration_tokens);
  EXPECT_TRUE(mixed->calibration_documents.empty());
  // The mix's identity: its sources' hashes and weights, in order.
  EXPECT_EQ(
      mixed->calibration_hash,
      Sha256Hex(absl::StrCat(cats_.sha256, " 3\n", dogs_.sha256, " 1\n")));
  auto swapped = BuildMixedCalibrationSplit({{&dogs_, 1}, {&cats_, 3}},
                                            *tokenizer_, options);
  ASSERT_TRUE(swapped.ok());
  EXPECT_NE(swapped->calibration_hash, mixed->calibration_hash);
  auto reweighted = BuildMixedCalibrationSplit({{&cats_, 1}, {&dogs_, 1}},
                                               *tokenizer_, options);
  ASSERT_TRUE(reweighted.ok());
  EXPECT_EQ(reweighted->sources[0].samples, 4);
  EXPECT_NE(reweighted->calibration_hash, mixed->calibration_hash);
}

TEST_F(MixedCalibrationTest, ErrorsNameTheSource) {
  CalibrationSplitOptions options;
  options.samples = 4;
  options.seq_len = 16;
  options.heldout_count = 5;
  CalibrationFile few = File("One ", " line.", 3);
  auto refused = BuildMixedCalibrationSplit({{&cats_, 1}, {&few, 1}},
                                            *tokenizer_, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("calibration.sources[1] (sha256 " + few.sha256 + ")"));
  EXPECT_THAT(refused.status().message(), HasSubstr("3 documents"));
  options.samples = 1;
  EXPECT_THAT(BuildMixedCalibrationSplit({{&cats_, 1}, {&dogs_, 1}},
                                         *tokenizer_, options)
                  .status()
                  .message(),
              HasSubstr("cannot give each of 2"));
}

}  // namespace
}  // namespace quant
