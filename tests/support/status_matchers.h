// gMock matchers for absl::StatusOr results: IsOkAndHolds(m) matches an ok
// StatusOr whose value matches m, and explains the status otherwise.
#ifndef QUANT_TESTS_SUPPORT_STATUS_MATCHERS_H_
#define QUANT_TESTS_SUPPORT_STATUS_MATCHERS_H_

#include <string>

#include "gmock/gmock.h"

namespace quant::testing {

MATCHER_P(IsOkAndHolds, value_matcher,
          std::string(negation ? "is not OK or holds a value that does not "
                                 "match "
                               : "is OK and holds a value that matches ") +
              ::testing::PrintToString(value_matcher)) {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

}  // namespace quant::testing

#endif  // QUANT_TESTS_SUPPORT_STATUS_MATCHERS_H_
