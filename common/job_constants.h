// Constants quantd, its workers and quantctl must agree on.
#ifndef QUANT_COMMON_JOB_CONSTANTS_H_
#define QUANT_COMMON_JOB_CONSTANTS_H_

namespace quant::common {

// Layers a block task quantizes and reports (q, k, v, o, gate, up, down):
// what progress counts a block's work in.
inline constexpr int kLayersPerBlockTask = 7;

// Begins every warning quantd derives from a finished job's audit, so
// clients can tell them from the submit-time ones.
inline constexpr char kAuditWarningPrefix[] = "audit: ";

}  // namespace quant::common

#endif  // QUANT_COMMON_JOB_CONSTANTS_H_
