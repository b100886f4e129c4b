// Runs the built `quantctl lab` on synthetic layers written as .npy files:
// the JSON keys, RTN's unit gains, GPTQ beating RTN on correlated inputs,
// GPTQ = RTN bit for bit on a diagonal Hessian, saved dequantized weights,
// damping auto, AWQ's alpha, the table, and the exit codes of bad input.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/file_util.h"
#include "core/base/tensor.h"
#include "core/io/npy.h"
#include "core/quant/gptq.h"
#include "core/quant/grid.h"
#include "core/quant/matrix_types.h"
#include "core/quant/rtn.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::QuantctlPath;
using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;

using ::nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kN = 32;
constexpr int64_t kK = 64;
constexpr int64_t kTokens = 512;

json ParseJson(const std::string& text) {
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

FloatTensor ToTensor(const RowMatrixF& m) {
  FloatTensor t;
  t.shape = {m.rows(), m.cols()};
  t.data.assign(m.data(), m.data() + m.size());
  return t;
}

RowMatrixF ToMatrix(const FloatTensor& t) {
  return Eigen::Map<const RowMatrixF>(t.data.data(), t.shape[0], t.shape[1]);
}

RowMatrixF Gaussian(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMatrixF m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// Mean over the T x N entries of (X(W-Q)ᵀ)², in double.
double OutputMse(const RowMatrixF& x, const RowMatrixF& w,
                 const RowMatrixF& q) {
  const Eigen::MatrixXd e = (w - q).cast<double>();
  const Eigen::MatrixXd y = x.cast<double>() * e.transpose();
  return y.squaredNorm() / static_cast<double>(y.size());
}

class LabCommandTest : public ::testing::Test {
 protected:
  // One correlated layer (X = Z·A, shared by every test) and one full
  // `--method all` run on it.
  static void SetUpTestSuite() {
    dir_ = new std::string(quant::testing::MakeTempDir());
    std::mt19937 rng(1234);
    w_ = new RowMatrixF(Gaussian(kN, kK, rng));
    const RowMatrixF mixing = Gaussian(kK, kK, rng);
    x_cal_ = new RowMatrixF(Gaussian(kTokens, kK, rng) * mixing);
    x_held_ = new RowMatrixF(Gaussian(kTokens, kK, rng) * mixing);
    ASSERT_TRUE(WriteNpy(Path("w.npy"), ToTensor(*w_)).ok());
    ASSERT_TRUE(WriteNpy(Path("xcal.npy"), ToTensor(*x_cal_)).ok());
    ASSERT_TRUE(WriteNpy(Path("xheld.npy"), ToTensor(*x_held_)).ok());
    all_ = new RunResult(RunQuantctl(
        "lab --weight " + Quote(Path("w.npy")) + " --cal " +
        Quote(Path("xcal.npy")) + " --heldout " + Quote(Path("xheld.npy")) +
        " --bits 3 --group 16 --awq_grid 0,0.1,0.25 --save_dequantized " +
        Quote(Path("all")) + " --json"));
  }
  static void TearDownTestSuite() {
    delete all_;
    delete x_held_;
    delete x_cal_;
    delete w_;
    delete dir_;
  }

  void SetUp() override {
    ASSERT_TRUE(quant::testing::PathExists(QuantctlPath()))
        << QuantctlPath() << " is not built (target quantctl)";
  }

  static std::string Path(const std::string& name) {
    return *dir_ + "/" + name;
  }
  static std::string Common() {
    return "lab --weight " + Quote(Path("w.npy")) + " --cal " +
           Quote(Path("xcal.npy"));
  }

  static json AllJson() {
    EXPECT_EQ(all_->exit_code, 0) << all_->err;
    const json j = ParseJson(all_->out);
    EXPECT_FALSE(j.is_discarded()) << all_->out;
    return j;
  }

  static std::string* dir_;
  static RowMatrixF* w_;
  static RowMatrixF* x_cal_;
  static RowMatrixF* x_held_;
  static RunResult* all_;
};

std::string* LabCommandTest::dir_ = nullptr;
RowMatrixF* LabCommandTest::w_ = nullptr;
RowMatrixF* LabCommandTest::x_cal_ = nullptr;
RowMatrixF* LabCommandTest::x_held_ = nullptr;
RunResult* LabCommandTest::all_ = nullptr;

TEST_F(LabCommandTest, JsonHasEveryRequiredKeyPerMethod) {
  const json j = AllJson();
  ASSERT_TRUE(j.contains("methods"));
  const std::vector<std::string> keys = {"weight_mse",
                                         "output_mse_cal",
                                         "output_mse_heldout",
                                         "rel_output_error_cal",
                                         "rel_output_error_heldout",
                                         "gain_cal",
                                         "gain_heldout",
                                         "flattery",
                                         "bits_per_weight",
                                         "seconds"};
  for (const std::string method : {"rtn", "gptq", "awq"}) {
    ASSERT_TRUE(j["methods"].contains(method)) << method;
    for (const std::string& key : keys) {
      ASSERT_TRUE(j["methods"][method].contains(key)) << method << "." << key;
      EXPECT_TRUE(j["methods"][method][key].is_number())
          << method << "." << key;
    }
  }
  for (const std::string key :
       {"damp", "tokens", "k", "tokens_per_k", "dead_channels",
        "rms_offdiag_corr", "inv_sqrt_t", "damp_retries"}) {
    EXPECT_TRUE(j["methods"]["gptq"][key].is_number()) << "gptq." << key;
  }
  const json& gptq = j["methods"]["gptq"];
  EXPECT_EQ(gptq["tokens"].get<int64_t>(), kTokens);
  EXPECT_EQ(gptq["k"].get<int64_t>(), kK);
  EXPECT_DOUBLE_EQ(gptq["damp"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(gptq["inv_sqrt_t"].get<double>(),
                   1.0 / std::sqrt(static_cast<double>(kTokens)));
  // 3 bits + (16 scale + 3 zero bits) per group of 16.
  EXPECT_DOUBLE_EQ(gptq["bits_per_weight"].get<double>(), 3.0 + 19.0 / 16.0);
}

TEST_F(LabCommandTest, RtnGainsAreExactlyOne) {
  const json j = AllJson();
  const json& rtn = j["methods"]["rtn"];
  EXPECT_EQ(rtn["gain_cal"].get<double>(), 1.0);
  EXPECT_EQ(rtn["gain_heldout"].get<double>(), 1.0);
  EXPECT_EQ(rtn["flattery"].get<double>(), 1.0);
}

TEST_F(LabCommandTest, GptqBeatsRtnOnCorrelatedLayerAndReportsFlattery) {
  const json j = AllJson();
  const json& gptq = j["methods"]["gptq"];
  EXPECT_GT(gptq["gain_cal"].get<double>(), 1.0);
  EXPECT_GT(gptq["gain_heldout"].get<double>(), 0.0);
  EXPECT_NEAR(
      gptq["flattery"].get<double>(),
      gptq["gain_cal"].get<double>() / gptq["gain_heldout"].get<double>(),
      1e-9);
  // Mixing makes the channels correlated far above sampling noise.
  EXPECT_GT(gptq["rms_offdiag_corr"].get<double>(),
            gptq["inv_sqrt_t"].get<double>());
}

TEST_F(LabCommandTest, SavedWeightsHaveShapeAndMatchReportedErrors) {
  const json j = AllJson();
  for (const std::string method : {"rtn", "gptq", "awq"}) {
    const absl::StatusOr<FloatTensor> q =
        ReadNpy(Path("all." + method + ".npy"));
    ASSERT_TRUE(q.ok()) << q.status();
    ASSERT_EQ(q->shape, (std::vector<int64_t>{kN, kK})) << method;
    const RowMatrixF qm = ToMatrix(*q);
    const json& m = j["methods"][method];
    EXPECT_NEAR(m["output_mse_cal"].get<double>(), OutputMse(*x_cal_, *w_, qm),
                1e-4 * m["output_mse_cal"].get<double>())
        << method;
    EXPECT_NEAR(m["output_mse_heldout"].get<double>(),
                OutputMse(*x_held_, *w_, qm),
                1e-4 * m["output_mse_heldout"].get<double>())
        << method;
    EXPECT_NEAR(m["weight_mse"].get<double>(),
                (*w_ - qm).cast<double>().squaredNorm() / (kN * kK),
                1e-6 * m["weight_mse"].get<double>())
        << method;
  }
  // RTN's file is the library's RTN on the same grid, bit for bit.
  GridSpec grid;
  grid.bits = 3;
  grid.group_size = 16;
  const absl::StatusOr<QuantizedLayer> rtn = QuantizeRtn(*w_, grid, "w");
  ASSERT_TRUE(rtn.ok()) << rtn.status();
  const absl::StatusOr<FloatTensor> saved = ReadNpy(Path("all.rtn.npy"));
  ASSERT_TRUE(saved.ok());
  EXPECT_TRUE(ToMatrix(*saved) == rtn->dequantized);
}

TEST_F(LabCommandTest, AwqAlphaComesFromTheGivenGrid) {
  const json j = AllJson();
  const json& awq = j["methods"]["awq"];
  const float alpha = awq["alpha"].get<float>();
  EXPECT_TRUE(alpha == 0.0f || alpha == 0.1f || alpha == 0.25f) << alpha;
  ASSERT_TRUE(awq["alpha_errors"].is_array());
  EXPECT_EQ(awq["alpha_errors"].size(), 3u);
}

TEST_F(LabCommandTest, DiagonalHessianMakesGptqEqualRtnBitForBit) {
  // Independent columns with different scales; H exactly diagonal.
  std::mt19937 rng(99);
  RowMatrixF x = Gaussian(kTokens, kK, rng);
  RowMatrixF h = RowMatrixF::Zero(kK, kK);
  for (int64_t c = 0; c < kK; ++c) {
    x.col(c) *= 0.1f + 0.2f * static_cast<float>(c % 7);
    h(c, c) = x.col(c).squaredNorm();
  }
  ASSERT_TRUE(WriteNpy(Path("xdiag.npy"), ToTensor(x)).ok());
  ASSERT_TRUE(WriteNpy(Path("hdiag.npy"), ToTensor(h)).ok());
  const RunResult result = RunQuantctl(
      "lab --weight " + Quote(Path("w.npy")) + " --cal " +
      Quote(Path("xdiag.npy")) + " --hessian " + Quote(Path("hdiag.npy")) +
      " --method all --group 16 --save_dequantized " + Quote(Path("diag")) +
      " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const absl::StatusOr<FloatTensor> rtn = ReadNpy(Path("diag.rtn.npy"));
  const absl::StatusOr<FloatTensor> gptq = ReadNpy(Path("diag.gptq.npy"));
  ASSERT_TRUE(rtn.ok()) << rtn.status();
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  ASSERT_EQ(rtn->data.size(), gptq->data.size());
  EXPECT_TRUE(std::equal(rtn->data.begin(), rtn->data.end(), gptq->data.begin(),
                         [](float a, float b) {
                           return std::memcmp(&a, &b, sizeof(float)) == 0;
                         }));
  const json j = ParseJson(result.out);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["methods"]["gptq"]["rms_offdiag_corr"].get<double>(), 0.0);
  // H's T was not given.
  EXPECT_TRUE(j["methods"]["gptq"]["tokens"].is_null());
}

TEST_F(LabCommandTest, DampAutoReportsAGridValue) {
  const RunResult result =
      RunQuantctl(Common() + " --method gptq --damp auto --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json j = ParseJson(result.out);
  ASSERT_FALSE(j.is_discarded()) << result.out;
  const json& gptq = j["methods"]["gptq"];
  const std::vector<double> grid = DefaultDampGrid();
  const double damp = gptq["damp"].get<double>();
  EXPECT_NE(std::find(grid.begin(), grid.end(), damp), grid.end()) << damp;
  EXPECT_EQ(gptq["damp_auto"]["chosen"].get<double>(), damp);
  EXPECT_EQ(gptq["damp_auto"]["grid"].get<std::vector<double>>(), grid);
  const std::vector<double> errors =
      gptq["damp_auto"]["validation_error"].get<std::vector<double>>();
  ASSERT_EQ(errors.size(), grid.size());
  const size_t best = static_cast<size_t>(
      std::min_element(errors.begin(), errors.end()) - errors.begin());
  EXPECT_EQ(grid[best], damp);
  // Trained on the 3/4 split.
  EXPECT_EQ(gptq["tokens"].get<int64_t>(), kTokens * 3 / 4);
  // Only GPTQ ran; no held-out: its fields are null.
  EXPECT_EQ(j["methods"].size(), 1u);
  EXPECT_TRUE(gptq["gain_heldout"].is_null());
  EXPECT_TRUE(gptq["flattery"].is_null());
  EXPECT_TRUE(gptq["output_mse_heldout"].is_null());
}

TEST_F(LabCommandTest, TablePrintsOneRowPerMethod) {
  const RunResult result = RunQuantctl(Common() + " --awq_grid 0,0.5");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  int rows = 0;
  for (const std::string method : {"rtn", "gptq", "awq"}) {
    int count = 0;
    for (absl::string_view line : absl::StrSplit(result.out, '\n')) {
      const std::vector<absl::string_view> cells =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (!cells.empty() && cells[0] == method) {
        ++count;
        ASSERT_EQ(cells.size(), 9u) << line;
        EXPECT_EQ(cells[3], "-") << line;  // No held-out.
      }
    }
    EXPECT_EQ(count, 1) << method << "\n" << result.out;
    rows += count;
  }
  EXPECT_EQ(rows, 3);
  EXPECT_THAT(result.out, HasSubstr("gptq: Hessian T 512, K 64"));
  EXPECT_THAT(result.out, HasSubstr("awq: alpha "));
}

TEST_F(LabCommandTest, DashedFlagSpellingsAreAccepted) {
  const RunResult result = RunQuantctl(
      Common() + " --method awq --awq-grid 0.5 --save-dequantized " +
      Quote(Path("dashed")) + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json j = ParseJson(result.out);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["methods"]["awq"]["alpha"].get<float>(), 0.5f);
  EXPECT_TRUE(quant::testing::PathExists(Path("dashed.awq.npy")));
}

TEST_F(LabCommandTest, HessianWithoutActivationsGivesCalibrationErrors) {
  const RowMatrixF h = x_cal_->transpose() * *x_cal_;
  ASSERT_TRUE(WriteNpy(Path("hcal.npy"), ToTensor(h)).ok());
  const RunResult result =
      RunQuantctl("lab --weight " + Quote(Path("w.npy")) + " --hessian " +
                  Quote(Path("hcal.npy")) + " --hessian_tokens 512 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("skipping awq"));
  const json j = ParseJson(result.out);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_FALSE(j["methods"].contains("awq"));
  const json& gptq = j["methods"]["gptq"];
  EXPECT_EQ(gptq["tokens"].get<int64_t>(), kTokens);
  EXPECT_GT(gptq["gain_cal"].get<double>(), 1.0);
  // From H alone the calibration MSE still matches the direct definition
  // (default grid: sym, 4 bits, per row).
  const absl::StatusOr<QuantizedLayer> rtn = QuantizeRtn(*w_, GridSpec(), "w");
  ASSERT_TRUE(rtn.ok()) << rtn.status();
  const double expected = OutputMse(*x_cal_, *w_, rtn->dequantized);
  EXPECT_NEAR(j["methods"]["rtn"]["output_mse_cal"].get<double>(), expected,
              1e-3 * expected);
}

TEST_F(LabCommandTest, UsageErrorsExitTwo) {
  RunResult result = RunQuantctl("lab --cal " + Quote(Path("xcal.npy")));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--weight"));

  result = RunQuantctl(Common() + " --bits 5");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--bits"));

  result = RunQuantctl("lab --weight " + Quote(Path("w.npy")) + " --hessian " +
                       Quote(Path("hcal.npy")) + " --damp auto");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--cal"));

  result = RunQuantctl(Common() + " --grid nope");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--grid"));

  result = RunQuantctl("lab --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("Example:"));
  EXPECT_THAT(result.out, HasSubstr("--act_order"));
}

TEST_F(LabCommandTest, BadInputsExitOneNamingShapesAndFiles) {
  std::mt19937 rng(7);
  ASSERT_TRUE(
      WriteNpy(Path("x63.npy"), ToTensor(Gaussian(kTokens, kK - 1, rng))).ok());
  RunResult result = RunQuantctl("lab --weight " + Quote(Path("w.npy")) +
                                 " --cal " + Quote(Path("x63.npy")));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("[32, 64]"));
  EXPECT_THAT(result.err, HasSubstr("[512, 63]"));
  EXPECT_THAT(result.err, HasSubstr("--cal"));

  ASSERT_TRUE(
      WriteNpy(Path("h63.npy"), ToTensor(Gaussian(kK - 1, kK - 1, rng))).ok());
  result = RunQuantctl(Common() + " --hessian " + Quote(Path("h63.npy")));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--hessian"));
  EXPECT_THAT(result.err, HasSubstr("[63, 63]"));

  RowMatrixF bad = *w_;
  bad(3, 5) = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(WriteNpy(Path("wnan.npy"), ToTensor(bad)).ok());
  result = RunQuantctl("lab --weight " + Quote(Path("wnan.npy")) + " --cal " +
                       Quote(Path("xcal.npy")));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("wnan.npy"));
  EXPECT_THAT(result.err, HasSubstr("NaN"));
}

}  // namespace
}  // namespace quant
