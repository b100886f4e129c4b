// The bad-input table of issue 8 against a real quantd (one local worker):
// every row must be as expected (status, where refused, a message naming
// the bad thing, nothing created, quantd still serving), and every case the
// issue lists must have its row, so a case dropped from the table fails
// here. Runs quant_bad_input_report --json as a subprocess.
#include <sys/wait.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_json_program.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

// The cases issue 8 lists, by their row names.
const std::set<std::string>& RequiredCases() {
  static const auto* cases = new std::set<std::string>{
      "checkpoint/malformed_header",
      "checkpoint/truncated",
      "checkpoint/missing_tensor",
      "checkpoint/wrong_shape",
      "checkpoint/nan_weight",
      "checkpoint/inf_weight",
      "checkpoint/unsupported_architecture",
      "checkpoint/outside_roots",
      "checkpoint/dotdot_traversal",
      "checkpoint/symlink_out",
      "checkpoint/missing_directory",
      "calibration/hash_mismatch",
      "calibration/unknown_hash",
      "calibration/invalid_jsonl",
      "calibration/ids_outside_vocabulary",
      "calibration/too_few_tokens",
      "calibration/upload_too_large",
      "recipe/unknown_field",
      "recipe/bits_5",
      "recipe/group_size_not_allowed",
      "recipe/gate_out_of_range",
      "recipe/override_matches_nothing",
      "recipe/conflicting_overrides",
      "calibration_rank/tokens_below_k",
      // The outside probe's classes (issue 23).
      "files/fifo_calibration",
      "files/directory_calibration",
      "files/fifo_weights",
      "files/fifo_config",
      "files/config_symlink_out",
      "files/weights_symlink_out",
      "config/deep_nesting",
      "config/positions_overflow",
      "config/unapplied_field",
      "config/unsupported_rope_scaling",
      "recipe/seq_len_over_positions",
      "recipe/catastrophic_ignore",
      "tokenizer/catastrophic_split",
      "api/oversized_label",
      "api/long_uri",
      // The previous release to compare with (issue 22).
      "recipe/gate_vs_previous_alone",
      "recipe/compare_to_unknown_job",
      "recipe/compare_to_outside_roots",
  };
  return *cases;
}

TEST(BadInputTest, EveryBadInputIsRefusedClearlyAndQuantdKeepsServing) {
  QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
  QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
  const std::string command =
      absl::StrCat(QUANT_BAD_INPUT_REPORT_PATH, " --json --job_timeout_s=600",
                   " --quantd=", testing::BinaryDir(), "/server/quantd",
                   " --quantctl=", testing::BinaryDir(), "/client/quantctl",
                   " --shared_dir=", testing::SharedDir());
  const testing::JsonProgramResult run = testing::RunJsonProgram(command);
  const int status = run.status;
  const std::string& out = run.out;
  ASSERT_TRUE(WIFEXITED(status)) << status << "\n" << out;
  ASSERT_NE(WEXITSTATUS(status), 2) << "the report could not start:\n" << out;
  const nlohmann::json& result = run.json;
  ASSERT_FALSE(result.is_discarded()) << "not JSON: " << out;

  std::set<std::string> seen;
  for (const nlohmann::json& row : result.at("rows")) {
    const std::string name = row.at("case").get<std::string>();
    SCOPED_TRACE(name);
    EXPECT_TRUE(seen.insert(name).second) << "duplicate row";
    EXPECT_TRUE(row.at("status_ok").get<bool>()) << row.dump(2);
    EXPECT_TRUE(row.at("message_ok").get<bool>()) << row.dump(2);
    EXPECT_TRUE(row.at("nothing_created_ok").get<bool>()) << row.dump(2);
    EXPECT_TRUE(row.at("still_serving").get<bool>()) << row.dump(2);
    EXPECT_TRUE(row.at("passed").get<bool>()) << row.dump(2);
    EXPECT_FALSE(row.at("message").get<std::string>().empty()) << row.dump(2);
  }
  for (const std::string& name : RequiredCases()) {
    EXPECT_EQ(seen.count(name), 1u) << "no row for " << name;
  }
  EXPECT_GE(seen.size(), RequiredCases().size());
  EXPECT_TRUE(result.at("quantd_clean_exit").get<bool>())
      << result.at("quantd_exit");
  EXPECT_TRUE(result.at("ok").get<bool>());
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace quant
