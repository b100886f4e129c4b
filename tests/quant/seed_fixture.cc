// expected.json loading and printed-precision tolerances.
#include "tests/quant/seed_fixture.h"

#include <cmath>
#include <cstdlib>

#include "core/base/file_util.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant::testing {

const nlohmann::json& SeedExpected() {
  static const nlohmann::json* const expected = [] {
    const std::string path = FixturesDir() + "/quant/expected.json";
    auto text = ReadFileToString(path);
    auto* j = new nlohmann::json();
    if (!text.ok()) {
      ADD_FAILURE() << "cannot read " << path << ": " << text.status();
      return j;
    }
    *j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j->is_discarded()) {
      ADD_FAILURE() << path << " is not valid JSON";
      *j = nlohmann::json();
    }
    return j;
  }();
  return *expected;
}

double PrintedTolerance(double value, const std::string& format) {
  if (format == "g") return 1e-12;
  const char kind = format.back();
  const int digits = std::atoi(format.c_str() + 1);
  if (kind == 'e') {
    const double exponent = std::floor(std::log10(std::fabs(value)));
    return 0.5 * std::pow(10.0, exponent - digits);
  }
  if (kind == '%') return 0.5 * std::pow(10.0, -digits - 2);
  return 0.5 * std::pow(10.0, -digits);  // 'f'
}

}  // namespace quant::testing
