// Dashed flag spellings: common::NormalizeFlagNames (quantd, quant-worker)
// and quant::NormalizeDashedFlagNames (quantctl, only the command's flags).
#include "common/flag_names.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "client/command.h"
#include "gtest/gtest.h"

ABSL_FLAG(bool, test_act_order, false, "a bool flag");
ABSL_FLAG(int, test_group_size, 128, "an int flag");

namespace quant {
namespace {

using Args = std::vector<std::string>;

TEST(FlagNamesTest, EveryNameAfterTheProgramIsRewritten) {
  EXPECT_EQ(common::NormalizeFlagNames(Args{"quant-worker", "--data-dir=/x-y",
                                            "-max-tasks", "3", "--plain", "--",
                                            "--after-dashes"}),
            (Args{"quant-worker", "--data_dir=/x-y", "-max_tasks", "3",
                  "--plain", "--", "--after-dashes"}));
}

TEST(FlagNamesTest, ValuesPositionalsAndBareDashesStay) {
  EXPECT_EQ(common::NormalizeFlagNames(
                Args{"p", "a-b", "-", "--", "--=x", "--x-y=--a-b"}),
            (Args{"p", "a-b", "-", "--", "--=x", "--x-y=--a-b"}));
  EXPECT_EQ(common::NormalizeFlagNames(Args{"p", "--=x", "--x-y=--a-b"}),
            (Args{"p", "--=x", "--x_y=--a-b"}));
}

TEST(FlagNamesTest, FilterSeesTheRewrittenNameAndFirstIsHonoured) {
  std::vector<std::string> seen;
  const Args out = common::NormalizeFlagNames(
      Args{"p", "--skip-me", "--keep-me", "--take-me=1"}, 2,
      [&seen](absl::string_view name) {
        seen.emplace_back(name);
        return name == "take_me";
      });
  EXPECT_EQ(out, (Args{"p", "--skip-me", "--keep-me", "--take_me=1"}));
  EXPECT_EQ(seen, (Args{"keep_me", "take_me"}));
}

TEST(FlagNamesTest, QuantctlRewritesOnlyTheCommandsOwnFlags) {
  Command command;
  command.name = "lab";
  command.flags = {absl::FindCommandLineFlag("test_act_order"),
                   absl::FindCommandLineFlag("test_group_size")};
  ASSERT_NE(command.flags[0], nullptr);
  ASSERT_NE(command.flags[1], nullptr);
  const char* argv[] = {"quantctl",
                        "lab",
                        "--test-act-order",
                        "--notest-act-order",
                        "--test-group-size=64",
                        "--unknown-flag",
                        "in-put.npy"};
  EXPECT_EQ(NormalizeDashedFlagNames(7, argv, {command}),
            (Args{"quantctl", "lab", "--test_act_order", "--notest_act_order",
                  "--test_group_size=64", "--unknown-flag", "in-put.npy"}));
  // Another command's line is left alone.
  const char* other[] = {"quantctl", "eval", "--test-act-order"};
  EXPECT_EQ(NormalizeDashedFlagNames(3, other, {command}),
            (Args{"quantctl", "eval", "--test-act-order"}));
}

}  // namespace
}  // namespace quant
