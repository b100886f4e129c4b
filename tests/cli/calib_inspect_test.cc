// `quantctl calib inspect`: documents, their token lengths, the split a
// recipe builds and the rank arithmetic, on a calibration file of known
// document lengths (token ids, so no tokenizer choice moves them).
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using testing::Quote;
using testing::RunQuantctl;
using testing::RunResult;

class CalibInspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SharedPath("models/stories260K/hf-f32");
    QUANT_REQUIRE_SHARED(model_);
    temp_ = testing::MakeTempDir();
    // Ten documents of 1..10 token ids: 55 tokens, median 5.
    std::string lines;
    for (int n = 1; n <= 10; ++n) {
      std::string ids;
      for (int i = 0; i < n; ++i) absl::StrAppend(&ids, i ? "," : "", 10 + i);
      absl::StrAppend(&lines, "{\"input_ids\": [", ids, "]}\n");
    }
    file_ = temp_ + "/calib.jsonl";
    ASSERT_TRUE(WriteFileAtomically(file_, lines).ok());
  }
  std::string model_;
  std::string temp_;
  std::string file_;
};

TEST_F(CalibInspectTest, DocumentsLengthsSplitAndRank) {
  // 4 windows of 8 tokens from 8 calibration documents (2 held out): the
  // 43 tokens of documents 1..10 less the held-out ones fill them.
  const std::string recipe = temp_ + "/r.yaml";
  ASSERT_TRUE(WriteFileAtomically(recipe,
                                  "calibration:\n  samples: 4\n  seq_len: 8\n"
                                  "  heldout_count: 2\n")
                  .ok());
  const RunResult run = RunQuantctl(
      absl::StrCat("calib inspect ", Quote(file_), " --checkpoint ",
                   Quote(model_), " --recipe ", Quote(recipe), " --json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << run.out;
  EXPECT_EQ(out["documents"], 10);
  EXPECT_EQ(out["id_documents"], 10);
  EXPECT_EQ(out["tokens"], 55);
  EXPECT_EQ(out["document_tokens"]["min"], 1);
  EXPECT_EQ(out["document_tokens"]["p10"], 1);
  EXPECT_EQ(out["document_tokens"]["p50"], 5);
  EXPECT_EQ(out["document_tokens"]["p90"], 9);
  EXPECT_EQ(out["document_tokens"]["max"], 10);
  EXPECT_EQ(out["document_tokens"]["mean"], 5.5);
  const json& split = out["split"];
  EXPECT_EQ(split["seq_len"], 8);
  EXPECT_EQ(split["calibration"]["documents"], 8);
  EXPECT_EQ(split["heldout"]["documents"], 2);
  EXPECT_EQ(split["calibration"]["windows"], 4);
  const int64_t t = split["calibration"]["tokens"];
  EXPECT_EQ(t, 32);  // 4 full windows of 8
  EXPECT_EQ(split["calibration"]["tokens_available"].get<int64_t>() +
                split["heldout"]["tokens_available"].get<int64_t>(),
            55);
  // stories260K: 64 inputs for six layer types, 172 for down_proj; T = 32
  // is fewer than both.
  ASSERT_EQ(out["rank"].size(), 2u) << out["rank"].dump();
  EXPECT_EQ(out["rank"][0]["inputs"], 64);
  EXPECT_EQ(out["rank"][0]["layers"].size(), 6u);
  EXPECT_EQ(out["rank"][0]["tokens_per_input"], 0.5);
  EXPECT_EQ(out["rank"][0]["rank_deficient"], true);
  EXPECT_EQ(out["rank"][1]["inputs"], 172);
  EXPECT_EQ(out["rank"][1]["layers"], json::array({"down_proj"}));

  const RunResult text =
      RunQuantctl(absl::StrCat("calib inspect ", Quote(file_), " --checkpoint ",
                               Quote(model_), " --recipe ", Quote(recipe)));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(
      text.out,
      HasSubstr("10 documents (0 text, 10 token ids, 0 conversations), 55"));
  EXPECT_THAT(text.out, HasSubstr("K = 172 (down_proj): T/K = 0.19"));
  EXPECT_THAT(text.out, HasSubstr("rank-deficient (T < K)"));
}

TEST_F(CalibInspectTest, WithoutACheckpointOnlyTheDocuments) {
  const RunResult run = RunQuantctl(absl::StrCat(
      "calib inspect ", Quote(file_), " --tokenizer ", Quote(model_)));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("median 5"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("rank:")));
}

TEST_F(CalibInspectTest, BadInputsAreNamed) {
  RunResult run = RunQuantctl("calib inspect " + Quote(file_));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--checkpoint"));
  run =
      RunQuantctl(absl::StrCat("calib inspect ", Quote(file_), " --tokenizer ",
                               Quote(model_), " --recipe x"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--recipe needs --checkpoint"));
  // An id outside the vocabulary, named by its line.
  const std::string bad = temp_ + "/bad.jsonl";
  ASSERT_TRUE(WriteFileAtomically(
                  bad, "{\"input_ids\": [1]}\n{\"input_ids\": [99999]}\n")
                  .ok());
  run = RunQuantctl(absl::StrCat("calib inspect ", Quote(bad), " --checkpoint ",
                                 Quote(model_)));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("line 2"));
  run = RunQuantctl(absl::StrCat("calib inspect ", Quote(temp_ + "/none"),
                                 " --checkpoint ", Quote(model_)));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("none"));
}

}  // namespace
}  // namespace quant
