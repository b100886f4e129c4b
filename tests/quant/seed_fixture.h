// Loads tests/fixtures/quant/expected.json (written by gen_seed_fixtures.py
// from the seed documents' reference code) and compares values at the
// precision the seeds print them.
#ifndef QUANT_TESTS_QUANT_SEED_FIXTURE_H_
#define QUANT_TESTS_QUANT_SEED_FIXTURE_H_

#include <cmath>
#include <string>

#include "nlohmann/json.hpp"

namespace quant::testing {

// The parsed expected.json; a null json (and a gtest failure) if unreadable.
const nlohmann::json& SeedExpected();

// Half a unit in the last place `format` prints ("e4" style ".4e", ".3f",
// ".1%", or "g" for exact), around `value`.
double PrintedTolerance(double value, const std::string& format);

}  // namespace quant::testing

// EXPECT that `actual` agrees with expected.json's table/key at the printed
// precision.
#define EXPECT_SEED_VALUE(table, key, actual)                               \
  do {                                                                      \
    const nlohmann::json& quant_e_ =                                        \
        ::quant::testing::SeedExpected()[table][key];                       \
    ASSERT_TRUE(quant_e_.is_object()) << "missing " << table << "/" << key; \
    const double quant_v_ = quant_e_["value"].get<double>();                \
    const std::string quant_f_ = quant_e_["format"].get<std::string>();     \
    EXPECT_NEAR((actual), quant_v_,                                         \
                ::quant::testing::PrintedTolerance(quant_v_, quant_f_))     \
        << table << "/" << key << " printed as " << quant_f_;               \
  } while (0)

// The same with a relative tolerance, for values the seeds print with more
// digits than are stable under float rounding (each use says why).
#define EXPECT_SEED_VALUE_REL(table, key, actual, relative)                 \
  do {                                                                      \
    const nlohmann::json& quant_e_ =                                        \
        ::quant::testing::SeedExpected()[table][key];                       \
    ASSERT_TRUE(quant_e_.is_object()) << "missing " << table << "/" << key; \
    const double quant_v_ = quant_e_["value"].get<double>();                \
    EXPECT_NEAR((actual), quant_v_, (relative)*std::fabs(quant_v_))         \
        << table << "/" << key;                                             \
  } while (0)

#endif  // QUANT_TESTS_QUANT_SEED_FIXTURE_H_
