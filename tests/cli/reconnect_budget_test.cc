// ReconnectBudget: the give-up deadline counts from the last working
// connection, and the backoff doubles to its ceiling and resets on success.
#include "client/reconnect_budget.h"

#include "gtest/gtest.h"

namespace quant {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

TEST(ReconnectBudgetTest, GivesUpAfterTheLimitWithoutAConnection) {
  ReconnectBudget budget(ReconnectOptions{}, kStart);
  EXPECT_FALSE(budget.Exhausted(kStart + absl::Seconds(119)));
  EXPECT_TRUE(budget.Exhausted(kStart + absl::Minutes(2)));
}

// A watch that streamed for an hour and then lost quantd still has the
// whole two minutes to reconnect (it once had none left).
TEST(ReconnectBudgetTest, LongWorkingStreamStillGetsTheFullBudget) {
  ReconnectBudget budget(ReconnectOptions{}, kStart);
  const absl::Time lost = kStart + absl::Hours(1);
  budget.OnConnected(lost);
  EXPECT_FALSE(budget.Exhausted(lost + absl::Seconds(1)));
  EXPECT_FALSE(budget.Exhausted(lost + absl::Seconds(119)));
  EXPECT_TRUE(budget.Exhausted(lost + absl::Minutes(2)));
}

TEST(ReconnectBudgetTest, BackoffDoublesToTheCeilingAndResetsOnConnect) {
  ReconnectOptions options;
  options.first_backoff = absl::Milliseconds(250);
  options.max_backoff = absl::Seconds(2);
  ReconnectBudget budget(options, kStart);
  EXPECT_EQ(budget.NextBackoff(), absl::Milliseconds(250));
  EXPECT_EQ(budget.NextBackoff(), absl::Milliseconds(500));
  EXPECT_EQ(budget.NextBackoff(), absl::Seconds(1));
  EXPECT_EQ(budget.NextBackoff(), absl::Seconds(2));
  EXPECT_EQ(budget.NextBackoff(), absl::Seconds(2));
  budget.OnConnected(kStart + absl::Seconds(10));
  EXPECT_EQ(budget.NextBackoff(), absl::Milliseconds(250));
}

}  // namespace
}  // namespace quant
