// Cross-checks core/pack against tests/fixtures/pack/pack_golden.json, whose
// words were produced by a Python re-implementation of the upstream packers'
// own procedures (AutoGPTQ's QuantLinear.pack, compressed-tensors'
// pack_to_int32); see make_pack_fixtures.py beside it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/pack/bit_packing.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/gptq_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pack/random_layer.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

std::string GoldenPath() {
  const std::string from_env =
      JoinPath(testing::FixturesDir(), "pack/pack_golden.json");
  if (testing::PathExists(from_env)) return from_env;
  return JoinPath(QUANT_PACK_TEST_FIXTURES_DIR, "pack/pack_golden.json");
}

GridKind KindFromName(const std::string& name) {
  if (name == "asym") return GridKind::kAsym;
  if (name == "sym-restricted") return GridKind::kSymRestricted;
  return GridKind::kSym;
}

QuantizedLayer LayerFromJson(const nlohmann::json& c) {
  QuantizedLayer layer;
  layer.grid.kind = KindFromName(c["kind"].get<std::string>());
  layer.grid.bits = c["bits"].get<int>();
  layer.grid.group_size = c["group_size"].get<int64_t>();
  layer.rows = c["rows"].get<int64_t>();
  layer.cols = c["cols"].get<int64_t>();
  layer.codes.resize(layer.rows, layer.cols);
  for (int64_t r = 0; r < layer.rows; ++r) {
    for (int64_t k = 0; k < layer.cols; ++k) {
      layer.codes(r, k) = c["codes"][r][k].get<uint8_t>();
    }
  }
  const int64_t groups = static_cast<int64_t>(c["scales"].size());
  layer.scales.resize(groups, layer.rows);
  layer.zeros.resize(groups, layer.rows);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < layer.rows; ++r) {
      layer.scales(g, r) = c["scales"][g][r].get<float>();
      layer.zeros(g, r) = c["zeros"][g][r].get<float>();
    }
  }
  layer.g_idx = c["g_idx"].get<std::vector<int32_t>>();
  testing::RecomputeDequantized(layer);
  return layer;
}

bool HasSequentialGroupsForTest(const QuantizedLayer& layer) {
  for (int64_t k = 0; k < layer.cols; ++k) {
    const int64_t g = layer.grid.group_size > 0 ? k / layer.grid.group_size : 0;
    if (layer.g_idx[k] != g) return false;
  }
  return true;
}

// The words as the int32 values the fixture lists, row-major.
std::vector<int32_t> AsInt32(const std::vector<uint32_t>& words) {
  return std::vector<int32_t>(words.begin(), words.end());
}

std::vector<int32_t> Flatten(const nlohmann::json& matrix) {
  std::vector<int32_t> flat;
  for (const auto& row : matrix) {
    for (const auto& v : row) flat.push_back(v.get<int32_t>());
  }
  return flat;
}

TEST(GoldenFixtureTest, PackedWordsMatchTheUpstreamProcedures) {
  absl::StatusOr<std::string> text = ReadFileToString(GoldenPath());
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json golden =
      nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(golden.is_discarded());
  ASSERT_GE(golden["cases"].size(), 8u);
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const QuantizedLayer layer = LayerFromJson(c);
    const nlohmann::json& expected = c["expected"];
    if (c["format"] == "gptq") {
      absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, name);
      ASSERT_TRUE(packed.ok()) << packed.status();
      EXPECT_EQ(AsInt32(packed->qweight), Flatten(expected["qweight"]));
      EXPECT_EQ(AsInt32(packed->qzeros), Flatten(expected["qzeros"]));
    } else if (c["version"].is_null()) {
      // A 0.17-layout file (no "version"): not written any more, still
      // read. Its rows unpack, whole codes a word, to the codes.
      const std::vector<int32_t> words = Flatten(expected["weight_packed"]);
      const int64_t per_row = static_cast<int64_t>(words.size()) / layer.rows;
      for (int64_t r = 0; r < layer.rows; ++r) {
        std::vector<uint32_t> row(words.begin() + r * per_row,
                                  words.begin() + (r + 1) * per_row);
        std::vector<uint8_t> codes(static_cast<size_t>(layer.cols));
        UnpackLine(row.data(), 1, layer.cols, layer.grid.bits,
                   PackLayout::kWholeCodes, codes.data(), 1);
        for (int64_t k = 0; k < layer.cols; ++k) {
          EXPECT_EQ(codes[static_cast<size_t>(k)], layer.codes(r, k))
              << "row " << r << " column " << k;
        }
      }
    } else {
      EXPECT_EQ(c["version"], kCompressedTensorsVersion);
      CompressedTensorsPackOptions options;
      if (!HasSequentialGroupsForTest(layer)) {
        options.actorder = CompressedTensorsActOrder::kGroup;
      }
      absl::StatusOr<PackedCompressedTensorsLayer> packed =
          PackCompressedTensors(layer, name, options);
      ASSERT_TRUE(packed.ok()) << packed.status();
      EXPECT_EQ(AsInt32(packed->weight_packed),
                Flatten(expected["weight_packed"]));
      if (expected.contains("weight_zero_point")) {
        EXPECT_EQ(AsInt32(packed->weight_zero_point),
                  Flatten(expected["weight_zero_point"]));
      } else {
        EXPECT_TRUE(packed->weight_zero_point.empty());
      }
    }
  }
}

}  // namespace
}  // namespace quant
