// Mixed precision's selection step: one setting per layer group (bits,
// group size, or kept in 16 bits) under a budget of stored bits, with the
// least total error. This is the multiple-choice knapsack; the caller
// measures each setting's cost (what the format stores for it) and error
// (its held-out output error, weighted by the group's measured
// sensitivity).
//
// Solved by dynamic programming over the budget cut into `buckets` units.
// Each choice's cost above its group's cheapest is rounded *up* to whole
// units, so every answer fits the real budget. The rounding can cost at
// most (groups x unit) bits of optimality, and a greedy pass then spends
// what the rounding left on the best upgrades that still fit. When the
// slack (budget minus the cheapest assignment) is at most `buckets` bits,
// the unit is one bit and the answer is exact.
#ifndef QUANT_CORE_QUANT_BIT_ALLOCATION_H_
#define QUANT_CORE_QUANT_BIT_ALLOCATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quant {

struct AllocationChoice {
  int64_t cost = 0;    // Bits stored, >= 0.
  double error = 0.0;  // Finite, >= 0.
};

struct AllocationGroup {
  std::string name;  // For error messages.
  std::vector<AllocationChoice> choices;
};

struct BitAllocationOptions {
  // Resolution of the dynamic programme: memory is groups x buckets x 2
  // bytes, time groups x buckets x choices.
  int64_t buckets = int64_t{1} << 14;
};

struct BitAllocation {
  std::vector<int> choice;  // Per group, an index into its choices.
  int64_t cost = 0;         // Summed over the groups; <= budget.
  double error = 0.0;       // Summed over the groups.
  int64_t budget = 0;
  // Bits of the budget one unit of the programme stood for (1: exact).
  int64_t unit = 1;
};

// InvalidArgument naming the group and choice for a negative cost, an
// error that is negative or not finite, or a group without choices;
// FailedPrecondition when even the cheapest choice of every group exceeds
// `budget` (saying by how much).
absl::StatusOr<BitAllocation> AllocateBits(
    const std::vector<AllocationGroup>& groups, int64_t budget,
    const BitAllocationOptions& options = {});

}  // namespace quant

#endif  // QUANT_CORE_QUANT_BIT_ALLOCATION_H_
