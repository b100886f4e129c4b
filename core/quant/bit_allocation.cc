// The multiple-choice knapsack of bit_allocation.h.
#include "core/quant/bit_allocation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"

namespace quant {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

absl::Status CheckGroups(const std::vector<AllocationGroup>& groups) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const AllocationGroup& group = groups[g];
    const std::string name =
        group.name.empty() ? absl::StrCat("group ", g) : group.name;
    if (group.choices.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": no choices"));
    }
    if (group.choices.size() > std::numeric_limits<uint16_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": ", group.choices.size(), " choices; at most ",
                       std::numeric_limits<uint16_t>::max()));
    }
    for (size_t c = 0; c < group.choices.size(); ++c) {
      const AllocationChoice& choice = group.choices[c];
      if (choice.cost < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": choice ", c, " costs ", choice.cost, " bits (< 0)"));
      }
      if (!std::isfinite(choice.error) || choice.error < 0.0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": choice ", c, " has error ", choice.error,
                         " (must be finite and >= 0)"));
      }
    }
  }
  return absl::OkStatus();
}

// The cheapest choice of a group, the lower error breaking ties.
int Cheapest(const AllocationGroup& group) {
  int best = 0;
  for (size_t c = 1; c < group.choices.size(); ++c) {
    const AllocationChoice& a = group.choices[c];
    const AllocationChoice& b = group.choices[best];
    if (a.cost < b.cost || (a.cost == b.cost && a.error < b.error)) {
      best = static_cast<int>(c);
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<BitAllocation> AllocateBits(
    const std::vector<AllocationGroup>& groups, int64_t budget,
    const BitAllocationOptions& options) {
  if (absl::Status s = CheckGroups(groups); !s.ok()) return s;
  if (options.buckets < 1) {
    return absl::InvalidArgumentError("buckets must be at least 1");
  }
  BitAllocation result;
  result.budget = budget;
  std::vector<int64_t> floor_cost(groups.size());
  int64_t cheapest = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int c = Cheapest(groups[g]);
    floor_cost[g] = groups[g].choices[c].cost;
    cheapest += floor_cost[g];
  }
  if (cheapest > budget) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the cheapest choice of every group stores ", cheapest,
        " bits, over the budget of ", budget, " by ", cheapest - budget));
  }
  const int64_t slack = budget - cheapest;
  const int64_t unit =
      std::max<int64_t>(1, (slack + options.buckets - 1) / options.buckets);
  const int64_t capacity = slack / unit;
  result.unit = unit;

  // best[r]: the least error of the groups so far using at most r units;
  // picked[g][r]: the choice of group g on that path.
  std::vector<double> best(capacity + 1, 0.0);
  std::vector<double> next(capacity + 1);
  std::vector<std::vector<uint16_t>> picked(
      groups.size(), std::vector<uint16_t>(capacity + 1, 0));
  for (size_t g = 0; g < groups.size(); ++g) {
    std::fill(next.begin(), next.end(), kInfinity);
    const std::vector<AllocationChoice>& choices = groups[g].choices;
    for (size_t c = 0; c < choices.size(); ++c) {
      const int64_t extra = choices[c].cost - floor_cost[g];
      const int64_t units = (extra + unit - 1) / unit;  // Rounded up.
      if (units > capacity) continue;
      for (int64_t r = units; r <= capacity; ++r) {
        const double total = best[r - units] + choices[c].error;
        if (total < next[r]) {
          next[r] = total;
          picked[g][r] = static_cast<uint16_t>(c);
        }
      }
    }
    best.swap(next);
  }
  result.choice.assign(groups.size(), 0);
  int64_t r = capacity;
  for (size_t g = groups.size(); g-- > 0;) {
    const int c = picked[g][r];
    result.choice[g] = c;
    const int64_t extra = groups[g].choices[c].cost - floor_cost[g];
    r -= (extra + unit - 1) / unit;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    result.cost += groups[g].choices[result.choice[g]].cost;
  }
  // Spend what rounding left: the upgrade with the largest error saved
  // that still fits, until none does.
  if (unit > 1) {
    for (;;) {
      double best_saving = 0.0;
      size_t best_group = 0;
      int best_choice = -1;
      for (size_t g = 0; g < groups.size(); ++g) {
        const AllocationChoice& now = groups[g].choices[result.choice[g]];
        for (size_t c = 0; c < groups[g].choices.size(); ++c) {
          const AllocationChoice& other = groups[g].choices[c];
          const double saving = now.error - other.error;
          if (saving > best_saving &&
              result.cost - now.cost + other.cost <= budget) {
            best_saving = saving;
            best_group = g;
            best_choice = static_cast<int>(c);
          }
        }
      }
      if (best_choice < 0) break;
      result.cost += groups[best_group].choices[best_choice].cost -
                     groups[best_group].choices[result.choice[best_group]].cost;
      result.choice[best_group] = best_choice;
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    result.error += groups[g].choices[result.choice[g]].error;
  }
  return result;
}

}  // namespace quant
