// Checks ReadNpy and WriteNpy against files written by NumPy itself
// (testdata/npy, made by testdata/make_npy_fixtures.py): NumPy's files read
// back with the values of the generator's formula, and our writer produces
// NumPy's bytes exactly.
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/file_util.h"
#include "core/io/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

std::string NumpyFile(const std::string& name) {
  return std::string(QUANT_IO_TESTDATA_DIR) + "/npy/" + name;
}

// Element i of every generated array is (i - 2) * 0.25, rounded to `dtype`.
std::vector<float> Formula(int64_t count, DType dtype) {
  std::vector<float> values;
  for (int64_t i = 0; i < count; ++i) {
    const float value = static_cast<float>(i - 2) * 0.25f;
    values.push_back(dtype == DType::kF16 ? HalfToFloat(FloatToHalf(value))
                                          : value);
  }
  return values;
}

struct NumpyCase {
  std::string file;
  std::vector<int64_t> shape;
  DType dtype;
  bool byte_identical;  // Version 1.0 files, which is what we write.
};

TEST(NpyNumpyTest, ReadsNumpyFilesAndWritesTheSameBytes) {
  const std::vector<NumpyCase> cases = {
      {"f32_2x3.npy", {2, 3}, DType::kF32, true},
      {"f32_scalar.npy", {}, DType::kF32, true},
      {"f32_5.npy", {5}, DType::kF32, true},
      {"f32_0x3.npy", {0, 3}, DType::kF32, true},
      {"f16_2x1x3.npy", {2, 1, 3}, DType::kF16, true},
      {"f32_4_v2.npy", {4}, DType::kF32, false},
      {"f32_4_v3.npy", {4}, DType::kF32, false},
  };
  const std::string out = JoinPath(testing::MakeTempDir(), "out.npy");
  for (const NumpyCase& c : cases) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<FloatTensor> read = ReadNpy(NumpyFile(c.file));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->shape, c.shape);
    int64_t count = 1;
    for (int64_t d : c.shape) count *= d;
    EXPECT_EQ(read->data, Formula(count, c.dtype));
    if (c.byte_identical) {
      ASSERT_TRUE(WriteNpy(out, *read, c.dtype).ok());
      EXPECT_EQ(*ReadFileToString(out), *ReadFileToString(NumpyFile(c.file)));
    }
  }
}

TEST(NpyNumpyTest, RejectsWhatWeDoNotSupport) {
  struct Reject {
    std::string file;
    std::string message;
  };
  for (const Reject& r : std::vector<Reject>{
           {"reject_fortran.npy", "Fortran-order"},
           {"reject_big_endian.npy", "unsupported dtype '>f4'"},
           {"reject_f8.npy", "unsupported dtype '<f8'"},
       }) {
    absl::StatusOr<FloatTensor> read = ReadNpy(NumpyFile(r.file));
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(r.message));
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(r.file));
  }
}

}  // namespace
}  // namespace quant
