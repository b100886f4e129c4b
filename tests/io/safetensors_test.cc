// Tests for safetensors writing and reading: round trips per dtype, metadata,
// layout, writer validation and header limits.
#include "core/io/safetensors.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/dtype.h"
#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

std::string BytesOf(absl::Span<const uint8_t> span) {
  return std::string(reinterpret_cast<const char*>(span.data()), span.size());
}

std::unique_ptr<SafetensorsFile> WriteAndOpen(
    const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata = {}) {
  const std::string path =
      JoinPath(testing::MakeTempDir(), "model.safetensors");
  absl::Status written = WriteSafetensors(path, tensors, metadata);
  EXPECT_TRUE(written.ok()) << written;
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

TEST(SafetensorsTest, RoundTripsEveryDtypeWithMetadata) {
  const std::vector<float> f32 = {1.5f, -2.25f, 0.0f, 3.0e-8f, 1e30f, -0.0f};
  const std::vector<double> f64 = {1.0 / 3.0, -1e300};
  const std::vector<int32_t> i32 = {-2147483647 - 1, 0, 7, 2147483647};
  const std::vector<int64_t> i64 = {-5, int64_t{1} << 40};
  const std::vector<int8_t> i8 = {-128, -1, 0, 127};
  const std::vector<uint8_t> u8 = {0, 1, 200, 255};
  // Values exactly representable in half and in bfloat16.
  const std::vector<float> halfable = {
      0.5f, -2.0f, 1024.0f, 65504.0f, std::ldexp(1.0f, -14), -3.140625f};
  const std::vector<float> bf16able = {1.0f, -0.0078125f, std::ldexp(1.0f, 120),
                                       1.5f, -256.0f,     0.1015625f};
  std::vector<uint16_t> f16_bits, bf16_bits;
  for (float v : halfable) f16_bits.push_back(FloatToHalf(v));
  for (float v : bf16able) bf16_bits.push_back(FloatToBFloat16(v));

  const std::string f32_data = Bytes(f32), f64_data = Bytes(f64),
                    i32_data = Bytes(i32), i64_data = Bytes(i64),
                    i8_data = Bytes(i8), u8_data = Bytes(u8),
                    f16_data = Bytes(f16_bits), bf16_data = Bytes(bf16_bits);
  const std::vector<TensorToWrite> tensors = {
      {"f32", DType::kF32, {2, 3}, f32_data},
      {"f64", DType::kF64, {2}, f64_data},
      {"i32", DType::kI32, {4}, i32_data},
      {"i64", DType::kI64, {1, 2}, i64_data},
      {"i8", DType::kI8, {2, 2}, i8_data},
      {"u8", DType::kU8, {4}, u8_data},
      {"f16", DType::kF16, {3, 2}, f16_data},
      {"bf16", DType::kBF16, {6}, bf16_data},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "tést"}};
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(tensors, metadata);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->metadata(), metadata);
  ASSERT_EQ(file->tensors().size(), tensors.size());
  // Laid out in the order given: tensors() is in offset order.
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(file->tensors()[i].name, tensors[i].name);
  }
  for (const TensorToWrite& want : tensors) {
    const TensorInfo* info = file->Find(want.name);
    ASSERT_NE(info, nullptr) << want.name;
    EXPECT_EQ(info->dtype, want.dtype) << want.name;
    EXPECT_EQ(info->shape, want.shape) << want.name;
    EXPECT_EQ(BytesOf(file->RawBytes(*info)), want.data) << want.name;
    absl::StatusOr<FloatTensor> read = file->ReadFloat(want.name);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->shape, want.shape);
    std::vector<float> expected(info->NumElements());
    ConvertToFloat(want.dtype, want.data.data(), expected.size(),
                   expected.data());
    EXPECT_EQ(read->data, expected) << want.name;
  }
  EXPECT_EQ(file->ReadFloat("f32")->data, f32);
  EXPECT_EQ(file->ReadFloat("f16")->data, halfable);
  EXPECT_EQ(file->ReadFloat("bf16")->data, bf16able);
  EXPECT_THAT(file->ReadFloat("i8")->data, ElementsAre(-128, -1, 0, 127));
  EXPECT_THAT(file->ReadFloat("u8")->data, ElementsAre(0, 1, 200, 255));
  EXPECT_THAT(file->ReadFloat("i32")->data,
              ElementsAre(-2147483648.0f, 0, 7, 2147483648.0f));
}

TEST(SafetensorsTest, HalfAndBFloat16StoreTheRoundedBits) {
  // 1 + 2^-12 is not representable in half (10 mantissa bits) nor bfloat16
  // (7): the stored bits are the conversions', and reading gives their value.
  const std::vector<float> values = {1.0f + 1.0f / 4096, 0.1f, -1e-9f};
  std::vector<uint16_t> half, bf16;
  for (float v : values) {
    half.push_back(FloatToHalf(v));
    bf16.push_back(FloatToBFloat16(v));
  }
  const std::string half_data = Bytes(half), bf16_data = Bytes(bf16);
  std::unique_ptr<SafetensorsFile> file =
      WriteAndOpen({{"h", DType::kF16, {3}, half_data},
                    {"b", DType::kBF16, {3}, bf16_data}});
  ASSERT_NE(file, nullptr);
  const std::vector<float> h = file->ReadFloat("h")->data;
  const std::vector<float> b = file->ReadFloat("b")->data;
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(h[i], HalfToFloat(half[i]));
    EXPECT_EQ(b[i], BFloat16ToFloat(bf16[i]));
    EXPECT_EQ(FloatToHalf(h[i]), half[i]);
    EXPECT_EQ(FloatToBFloat16(b[i]), bf16[i]);
  }
  EXPECT_NE(h[0], values[0]);
  EXPECT_NE(b[0], values[0]);
}

TEST(SafetensorsTest, ScalarAndEmptyTensors) {
  const std::vector<float> scalar = {42.0f};
  const std::string scalar_data = Bytes(scalar);
  std::unique_ptr<SafetensorsFile> file =
      WriteAndOpen({{"empty", DType::kF32, {0, 5}, ""},
                    {"scalar", DType::kF32, {}, scalar_data},
                    {"empty2", DType::kBF16, {3, 0}, ""}});
  ASSERT_NE(file, nullptr);
  absl::StatusOr<FloatTensor> s = file->ReadFloat("scalar");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->shape.empty());
  EXPECT_THAT(s->data, ElementsAre(42.0f));
  absl::StatusOr<FloatTensor> e = file->ReadFloat("empty");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->shape, ElementsAre(0, 5));
  EXPECT_TRUE(e->data.empty());
  EXPECT_EQ(file->RawBytes(*file->Find("empty2")).size(), 0u);
}

TEST(SafetensorsTest, HeaderIsPaddedToEightBytesAndIsValidJson) {
  const std::string path = JoinPath(testing::MakeTempDir(), "x.safetensors");
  for (const std::string name : {"a", "ab", "abc", "abcd", "abcdefgh"}) {
    const std::string data(4, '\0');
    ASSERT_TRUE(WriteSafetensors(path, {{name, DType::kF32, {1}, data}}).ok());
    const std::string bytes = *ReadFileToString(path);
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);  // The test host is little-endian.
    EXPECT_EQ(length % 8, 0u) << name;
    EXPECT_EQ(bytes.size(), 8 + length + 4) << name;
    const nlohmann::json header =
        nlohmann::json::parse(bytes.substr(8, length));
    EXPECT_EQ(header[name]["data_offsets"], nlohmann::json({0, 4}));
    EXPECT_EQ(header[name]["dtype"], "F32");
    EXPECT_FALSE(header.contains("__metadata__"));
  }
}

TEST(SafetensorsTest, WriteReplacesAtomicallyAndLeavesNoTempFiles) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = JoinPath(dir, "m.safetensors");
  const std::string one(4, '\1'), two(8, '\2');
  ASSERT_TRUE(WriteSafetensors(path, {{"a", DType::kU8, {4}, one}}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {{"b", DType::kU8, {8}, two}}).ok());
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(names, ElementsAre("m.safetensors"));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Find("a"), nullptr);
  ASSERT_NE((*file)->Find("b"), nullptr);
}

TEST(SafetensorsTest, WriterRejectsBadTensorsNamingThem) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = JoinPath(dir, "bad.safetensors");
  const std::string four(4, '\0');
  absl::Status status =
      WriteSafetensors(path, {{"w.short", DType::kF32, {2}, four}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor \"w.short\""));
  EXPECT_THAT(status.message(), HasSubstr("needs 8"));

  status = WriteSafetensors(
      path, {{"dup", DType::kF32, {1}, four}, {"dup", DType::kF32, {1}, four}});
  EXPECT_THAT(status.message(), HasSubstr("tensor \"dup\": name is repeated"));

  status = WriteSafetensors(path, {{"neg", DType::kF32, {-1}, ""}});
  EXPECT_THAT(status.message(), HasSubstr("tensor \"neg\""));
  EXPECT_THAT(status.message(), HasSubstr("negative"));

  status = WriteSafetensors(path, {{"__metadata__", DType::kU8, {4}, four}});
  EXPECT_THAT(status.message(), HasSubstr("reserved"));

  status = WriteSafetensors(path, {{"bad\xff", DType::kU8, {4}, four}});
  EXPECT_THAT(status.message(), HasSubstr("not valid UTF-8"));
  EXPECT_FALSE(FileExists(path));
}

TEST(SafetensorsTest, WriteIntoMissingFolderFailsNamingIt) {
  const std::string path =
      JoinPath(testing::MakeTempDir(), "no/such/dir/m.safetensors");
  const std::string data(4, '\0');
  const absl::Status status =
      WriteSafetensors(path, {{"a", DType::kF32, {1}, data}});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no/such/dir"));
}

TEST(SafetensorsTest, OpenErrorsNameThePath) {
  const std::string dir = testing::MakeTempDir();
  const std::string missing = JoinPath(dir, "missing.safetensors");
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(missing);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr(missing));

  const std::string garbage = JoinPath(dir, "garbage.safetensors");
  ASSERT_TRUE(WriteFileAtomically(garbage, "abc").ok());
  file = SafetensorsFile::Open(garbage);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(file.status().message(), HasSubstr(garbage));
}

TEST(SafetensorsTest, ReadFloatOfMissingTensorIsNotFound) {
  const std::string data(4, '\0');
  std::unique_ptr<SafetensorsFile> file =
      WriteAndOpen({{"a", DType::kF32, {1}, data}});
  ASSERT_NE(file, nullptr);
  absl::StatusOr<FloatTensor> read = file->ReadFloat("nope");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr("\"nope\""));
  EXPECT_EQ(file->Find("nope"), nullptr);
}

TEST(SafetensorsTest, MetadataCountReadsNonNegativeIntegersNamingTheField) {
  const std::vector<float> values = {1.0f, 2.0f};
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(
      {{"a", DType::kF32, {2}, VectorBytes(values)}}, {{"zero", "0"},
                                                       {"big", "9000000000"},
                                                       {"negative", "-3"},
                                                       {"word", "seven"},
                                                       {"fraction", "1.5"},
                                                       {"empty", ""}});
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->ReadFloat("a")->data, values);
  EXPECT_EQ(file->MetadataCount("zero").value_or(-1), 0);
  EXPECT_EQ(file->MetadataCount("big").value_or(-1), 9000000000);
  for (const char* bad : {"negative", "word", "fraction", "empty"}) {
    const absl::StatusOr<int64_t> count = file->MetadataCount(bad);
    EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(
        count.status().message(),
        HasSubstr(absl::StrCat("model.safetensors: metadata ", bad, " = \"")))
        << count.status();
    EXPECT_THAT(count.status().message(),
                HasSubstr("is not a non-negative integer"));
  }
  const absl::StatusOr<int64_t> missing = file->MetadataCount("absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("model.safetensors: metadata absent is missing"));
}

TEST(SafetensorsTest, LimitsAreEnforced) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = JoinPath(dir, "m.safetensors");
  const std::string data(4, '\0');
  ASSERT_TRUE(
      WriteSafetensors(path, {{"a", DType::kF32, {1, 1, 1, 1}, data}}).ok());
  const std::string bytes = *ReadFileToString(path);
  EXPECT_TRUE(ParseSafetensorsHeader(bytes).ok());

  SafetensorsLimits small_header;
  small_header.max_header_bytes = 16;
  absl::StatusOr<SafetensorsHeader> parsed =
      ParseSafetensorsHeader(bytes, small_header);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("exceeds the limit of 16"));

  SafetensorsLimits low_rank;
  low_rank.max_rank = 3;
  parsed = ParseSafetensorsHeader(bytes, low_rank);
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("tensor \"a\": shape has rank 4, over the limit of 3"));
}

// A header listing more tensors than the bound is refused while it is
// parsed (1.5 million once took 8 s and 1.3 GB before being refused).
TEST(SafetensorsTest, TensorCountIsBounded) {
  const std::string zeros(4, '\0');
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 200; ++i) {
    tensors.push_back({absl::StrCat("t", i), DType::kF32, {1}, zeros});
  }
  const std::string dir = testing::MakeTempDir();
  const std::string path = JoinPath(dir, "m.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  const std::string bytes = *ReadFileToString(path);
  SafetensorsLimits limits;
  limits.max_tensors = 200;
  EXPECT_TRUE(ParseSafetensorsHeader(bytes, limits).ok());
  limits.max_tensors = 199;
  absl::StatusOr<SafetensorsHeader> parsed =
      ParseSafetensorsHeader(bytes, limits);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("header lists 200 tensors, over the limit of 199"));
  // A header far over the bound stops at the value count, before the
  // document is built.
  limits.max_tensors = 2;
  parsed = ParseSafetensorsHeader(bytes, limits);
  EXPECT_THAT(parsed.status().message(), HasSubstr("more than 1048 values"));
}

TEST(SafetensorsTest, HeaderDataOffsetPointsPastHeader) {
  const std::vector<float> values = {1, 2, 3};
  const std::string data = Bytes(values);
  const std::string path = JoinPath(testing::MakeTempDir(), "m.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"a", DType::kF32, {3}, data}}).ok());
  const std::string bytes = *ReadFileToString(path);
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(bytes);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->data_offset + data.size(), bytes.size());
  EXPECT_EQ(bytes.substr(header->data_offset), data);
}

TEST(SafetensorsTest, StreamWriterWritesTheSameBytesAsWriteSafetensors) {
  const std::string dir = testing::MakeTempDir();
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  const std::vector<int32_t> b = {4, 5};
  const std::string whole = JoinPath(dir, "whole.safetensors");
  ASSERT_TRUE(WriteSafetensors(whole,
                               {{"a", DType::kF32, {3, 2}, Bytes(a)},
                                {"b", DType::kI32, {2}, Bytes(b)}},
                               {{"seq_len", "3"}})
                  .ok());
  const std::string streamed = JoinPath(dir, "streamed.safetensors");
  auto writer = SafetensorsStreamWriter::Create(
      streamed, {{"a", DType::kF32, {3, 2}}, {"b", DType::kI32, {2}}},
      {{"seq_len", "3"}});
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string a_bytes = Bytes(a);
  // Row by row, as a chunked producer appends.
  for (int row = 0; row < 3; ++row) {
    ASSERT_TRUE((*writer)->Append(a_bytes.substr(row * 8, 8)).ok());
  }
  EXPECT_FALSE(FileExists(streamed)) << "visible before Commit";
  ASSERT_TRUE((*writer)->Append(Bytes(b)).ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  EXPECT_EQ(*ReadFileToString(streamed), *ReadFileToString(whole));
}

TEST(SafetensorsTest, StreamWriterRefusesTooManyOrTooFewBytes) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = JoinPath(dir, "x.safetensors");
  {
    auto writer =
        SafetensorsStreamWriter::Create(path, {{"a", DType::kF32, {2}}});
    ASSERT_TRUE(writer.ok());
    const absl::Status over = (*writer)->Append(std::string(12, 'x'));
    EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(over.message(), HasSubstr("more than the 8 declared"));
  }
  {
    auto writer =
        SafetensorsStreamWriter::Create(path, {{"a", DType::kF32, {2}}});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(std::string(4, 'x')).ok());
    const absl::Status short_write = (*writer)->Commit();
    EXPECT_EQ(short_write.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(short_write.message(), HasSubstr("4 of the 8"));
  }
  EXPECT_FALSE(FileExists(path));
  // Nothing left behind: no temporary files either.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // Declarations are validated like WriteSafetensors' tensors.
  auto repeated = SafetensorsStreamWriter::Create(
      path, {{"a", DType::kF32, {2}}, {"a", DType::kF32, {1}}});
  EXPECT_THAT(repeated.status().message(), HasSubstr("name is repeated"));
}

TEST(SafetensorsTest, ReleasedBytesReadBackUnchanged) {
  // Large enough to span many pages.
  std::vector<float> values(1 << 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * i;
  auto file = WriteAndOpen({{"v", DType::kF32, {1 << 16}, Bytes(values)}});
  ASSERT_NE(file, nullptr);
  const TensorInfo* info = file->Find("v");
  const std::string before = BytesOf(file->RawBytes(*info));
  file->ReleaseBytes(*info, 100, info->ByteSize() - 100);
  file->ReleaseBytes(*info, 0, info->ByteSize() + 4096);  // Clamped.
  EXPECT_EQ(BytesOf(file->RawBytes(*info)), before);
}

}  // namespace
}  // namespace quant
