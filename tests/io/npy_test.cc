// Tests for .npy reading and writing: round trips, header variants NumPy
// writes (versions 1-3, 0-d and 1-element tuples) and clear rejections.
#include "core/io/npy.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A .npy file built by hand the way numpy.save lays it out.
std::string NpyBytes(const std::string& dict, const std::string& data,
                     int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  uint32_t length = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < prefix - 8; ++i) {
    out.push_back(static_cast<char>(length & 0xFF));
    length >>= 8;
  }
  return out + header + data;
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(float));
}

class NpyTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) {
    if (dir_.empty()) dir_ = testing::MakeTempDir();
    return JoinPath(dir_, name);
  }
  absl::StatusOr<FloatTensor> ReadBytes(const std::string& bytes) {
    const std::string path = Path("in.npy");
    EXPECT_TRUE(WriteFileAtomically(path, bytes).ok());
    return ReadNpy(path);
  }
  std::string dir_;
};

TEST_F(NpyTest, RoundTripsF32AndF16AcrossRanks) {
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {5}, {1}, {2, 3}, {2, 1, 4}, {0}, {3, 0, 2}};
  for (const auto& shape : shapes) {
    FloatTensor tensor;
    tensor.shape = shape;
    for (int64_t i = 0; i < tensor.NumElements(); ++i) {
      tensor.data.push_back(0.1f * static_cast<float>(i) - 0.7f);
    }
    for (DType dtype : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(tensor.ShapeString() + std::string(DTypeName(dtype)));
      const std::string path = Path("t.npy");
      ASSERT_TRUE(WriteNpy(path, tensor, dtype).ok());
      const std::string bytes = *ReadFileToString(path);
      // Data starts 64-byte aligned, and the header is a version 1.0 one.
      const size_t element = dtype == DType::kF32 ? 4 : 2;
      EXPECT_EQ((bytes.size() - tensor.data.size() * element) % 64, 0u);
      EXPECT_EQ(bytes[6], 1);
      EXPECT_EQ(bytes.back() == '\n', tensor.data.empty());
      absl::StatusOr<FloatTensor> read = ReadNpy(path);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(read->shape, shape);
      if (dtype == DType::kF32) {
        EXPECT_EQ(read->data, tensor.data);
      } else {
        std::vector<float> rounded;
        for (float v : tensor.data)
          rounded.push_back(HalfToFloat(FloatToHalf(v)));
        EXPECT_EQ(read->data, rounded);
      }
    }
  }
}

TEST_F(NpyTest, WritesTheHeaderNumpyWrites) {
  FloatTensor tensor{{5}, {1, 2, 3, 4, 5}};
  const std::string path = Path("h.npy");
  ASSERT_TRUE(WriteNpy(path, tensor).ok());
  const std::string bytes = *ReadFileToString(path);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_THAT(bytes, HasSubstr("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (5,), }"));
  FloatTensor scalar{{}, {2.5f}};
  ASSERT_TRUE(WriteNpy(path, scalar, DType::kF16).ok());
  EXPECT_THAT(*ReadFileToString(path), HasSubstr("'<f2'"));
  EXPECT_THAT(*ReadFileToString(path), HasSubstr("'shape': (), }"));
}

TEST_F(NpyTest, ReadsVersions2And3AndHeaderVariants) {
  const std::string data = FloatBytes({1, 2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    auto read = ReadBytes(
        NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                 data, major));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_THAT(read->shape, ElementsAre(2, 3));
    EXPECT_THAT(read->data, ElementsAre(1, 2, 3, 4, 5, 6));
  }
  // Key order, double quotes, no trailing comma, no spaces.
  auto read = ReadBytes(NpyBytes(
      "{\"shape\":(6,),\"fortran_order\":False,\"descr\":\"<f4\"}", data));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->shape, ElementsAre(6));
}

TEST_F(NpyTest, RejectsUnsupportedArraysClearly) {
  const std::string data = FloatBytes({1, 2, 3, 4});
  struct Case {
    std::string dict;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
            "Fortran-order"},
           {"{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }",
            "unsupported dtype '>f4'"},
           {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
            "unsupported dtype '<f8'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (4), }",
            "trailing comma"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }",
            "negative dimension"},
           {"{'descr': '<f4', 'fortran_order': False}", "'shape'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), "
            "'extra': 1}",
            "expected a string, True/False or a tuple"},
           {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
            "'shape': (4,)}",
            "duplicate key 'descr'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)",
            "expected"},
           {"{'descr': '<f4", "unterminated string"},
       }) {
    auto read = ReadBytes(NpyBytes(c.dict, data));
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument)
        << c.dict;
    EXPECT_THAT(read.status().message(), HasSubstr(c.message)) << c.dict;
    EXPECT_THAT(read.status().message(), HasSubstr("in.npy")) << c.dict;
  }
}

TEST_F(NpyTest, RejectsTruncationAndExtraBytes) {
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  auto read = ReadBytes(NpyBytes(dict, FloatBytes({1, 2, 3})));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("needs 16 bytes"));

  read = ReadBytes(NpyBytes(dict, FloatBytes({1, 2, 3, 4, 5})));
  EXPECT_THAT(read.status().message(), HasSubstr("4 unexpected bytes"));

  const std::string full = NpyBytes(dict, FloatBytes({1, 2, 3, 4}));
  ASSERT_TRUE(ReadBytes(full).ok());
  // Every proper prefix fails cleanly.
  for (size_t size = 0; size < full.size(); ++size) {
    EXPECT_FALSE(ReadBytes(full.substr(0, size)).ok()) << size;
  }
  read = ReadBytes("not numpy at all");
  EXPECT_THAT(read.status().message(), HasSubstr("bad magic"));
  std::string future = full;
  future[6] = 4;
  EXPECT_THAT(ReadBytes(future).status().message(),
              HasSubstr("unsupported .npy format version 4.0"));
}

TEST_F(NpyTest, WriteValidatesItsInput) {
  FloatTensor mismatched{{2, 2}, {1, 2, 3}};
  absl::Status status = WriteNpy(Path("bad.npy"), mismatched);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("holds 4 elements"));
  FloatTensor ok{{1}, {1}};
  status = WriteNpy(Path("bad.npy"), ok, DType::kBF16);
  EXPECT_THAT(status.message(), HasSubstr("F32 and F16 only"));
  EXPECT_FALSE(FileExists(Path("bad.npy")));
}

TEST_F(NpyTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadNpy(Path("missing.npy")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace quant
