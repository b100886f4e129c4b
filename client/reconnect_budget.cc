// See reconnect_budget.h.
#include "client/reconnect_budget.h"

#include <algorithm>

namespace quant {

ReconnectBudget::ReconnectBudget(const ReconnectOptions& options,
                                 absl::Time now)
    : options_(options),
      give_up_at_(now + options.give_up_after),
      backoff_(options.first_backoff) {}

void ReconnectBudget::OnConnected(absl::Time now) {
  give_up_at_ = now + options_.give_up_after;
  backoff_ = options_.first_backoff;
}

absl::Duration ReconnectBudget::NextBackoff() {
  const absl::Duration wait = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  return wait;
}

}  // namespace quant
