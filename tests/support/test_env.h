// Where tests find ../shared (models, data, tokenizers) and tests/fixtures.
//
// Tests that need ../shared call QUANT_REQUIRE_SHARED(path): where the path
// is missing they skip and say why, except under CI=true, where its absence
// fails the test (CI always has ../shared).
#ifndef QUANT_TESTS_SUPPORT_TEST_ENV_H_
#define QUANT_TESTS_SUPPORT_TEST_ENV_H_

#include <string>

#include "gtest/gtest.h"

namespace quant::testing {

// The shared folder (env QUANT_SHARED_DIR, set by ctest), e.g. ".../shared".
std::string SharedDir();
// tests/fixtures in the source tree (env QUANT_FIXTURES_DIR).
std::string FixturesDir();
// The build folder (env QUANT_BINARY_DIR), where built programs live.
std::string BinaryDir();
// SharedDir() + "/" + relative.
std::string SharedPath(const std::string& relative);
// A fresh empty temporary folder, removed with its contents at exit.
std::string MakeTempDir();
bool RunningInCi();
bool PathExists(const std::string& path);
// `path` with symlinks resolved (as quantd's URI policy sees it); `path`
// itself when it does not exist.
std::string RealPath(const std::string& path);

}  // namespace quant::testing

#define QUANT_REQUIRE_SHARED(path)                                     \
  do {                                                                 \
    if (!::quant::testing::PathExists(path)) {                         \
      if (::quant::testing::RunningInCi()) {                           \
        FAIL() << "CI=true but shared data is missing: " << (path);    \
      }                                                                \
      GTEST_SKIP() << "shared data not present (" << (path)            \
                   << "); set QUANT_SHARED_DIR to the shared/ folder"; \
    }                                                                  \
  } while (0)

#endif  // QUANT_TESTS_SUPPORT_TEST_ENV_H_
