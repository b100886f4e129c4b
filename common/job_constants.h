// Constants quantd, its workers and quantctl must agree on.
#ifndef QUANT_COMMON_JOB_CONSTANTS_H_
#define QUANT_COMMON_JOB_CONSTANTS_H_

namespace quant::common {

// Layers a block task quantizes and reports (q, k, v, o, gate, up, down):
// what progress counts a block's work in.
inline constexpr int kLayersPerBlockTask = 7;

// Of those, the layers a block's layer group `group` quantizes (a round's
// reduce: q, k, v; o; gate, up; down); 0 outside 0..3.
constexpr int LayersOfBlockGroup(int group) {
  return group == 0 ? 3 : group == 1 ? 1 : group == 2 ? 2 : group == 3 ? 1 : 0;
}
static_assert(LayersOfBlockGroup(0) + LayersOfBlockGroup(1) +
                      LayersOfBlockGroup(2) + LayersOfBlockGroup(3) ==
                  kLayersPerBlockTask,
              "a block's groups cover its layers");

// Begins every warning quantd derives from a finished job's audit, so
// clients can tell them from the submit-time ones.
inline constexpr char kAuditWarningPrefix[] = "audit: ";

}  // namespace quant::common

#endif  // QUANT_COMMON_JOB_CONSTANTS_H_
