// Status propagation macros. Abseil 20220623 ships none, so these two are ours.
#ifndef QUANT_CORE_BASE_STATUS_MACROS_H_
#define QUANT_CORE_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define QUANT_STATUS_CONCAT_INNER_(a, b) a##b
#define QUANT_STATUS_CONCAT_(a, b) QUANT_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define QUANT_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status quant_status_ = (expr);         \
    if (!quant_status_.ok()) return quant_status_; \
  } while (0)

// `lhs = value of rexpr` (an absl::StatusOr<T>), or returns its error.
#define QUANT_ASSIGN_OR_RETURN(lhs, rexpr) \
  QUANT_ASSIGN_OR_RETURN_IMPL_(            \
      QUANT_STATUS_CONCAT_(quant_statusor_, __LINE__), lhs, rexpr)

#define QUANT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return statusor.status();            \
  lhs = std::move(statusor).value()

#endif  // QUANT_CORE_BASE_STATUS_MACROS_H_
