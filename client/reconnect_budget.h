// When a client that lost its stream to quantd keeps trying to reconnect:
// backoff that doubles up to a ceiling, and a give-up deadline that counts
// from when the connection was last seen working (not from when the watch
// began, so a watch that ran for hours still rides out a restart).
#ifndef QUANT_CLIENT_RECONNECT_BUDGET_H_
#define QUANT_CLIENT_RECONNECT_BUDGET_H_

#include "absl/time/time.h"

namespace quant {

struct ReconnectOptions {
  absl::Duration first_backoff = absl::Milliseconds(250);
  absl::Duration max_backoff = absl::Seconds(5);
  // How long quantd may stay unreachable before the client gives up.
  absl::Duration give_up_after = absl::Minutes(2);
};

// Times are passed in so tests need no clock.
class ReconnectBudget {
 public:
  ReconnectBudget(const ReconnectOptions& options, absl::Time now);

  // The connection worked at `now` (events arrived): the give-up deadline
  // restarts and the backoff returns to its first step.
  void OnConnected(absl::Time now);

  // True once quantd has been unreachable for give_up_after.
  bool Exhausted(absl::Time now) const { return now >= give_up_at_; }

  // The wait before the next attempt; each call doubles the next one.
  absl::Duration NextBackoff();

 private:
  ReconnectOptions options_;
  absl::Time give_up_at_;
  absl::Duration backoff_;
};

}  // namespace quant

#endif  // QUANT_CLIENT_RECONNECT_BUDGET_H_
