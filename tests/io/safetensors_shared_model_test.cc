// Reads the real stories260K checkpoint in float32 and bfloat16 from
// ../shared and checks the two agree.
#include <cstring>
#include <memory>
#include <string>

#include "core/base/dtype.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_collection.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

TEST(SharedModelTest, Bf16CheckpointIsTheRoundedF32Checkpoint) {
  const std::string f32_path =
      testing::SharedPath("models/stories260K/hf-f32/model.safetensors");
  const std::string bf16_path =
      testing::SharedPath("models/stories260K/hf-bf16/model.safetensors");
  QUANT_REQUIRE_SHARED(f32_path);
  QUANT_REQUIRE_SHARED(bf16_path);
  auto f32 = SafetensorsFile::Open(f32_path);
  auto bf16 = SafetensorsFile::Open(bf16_path);
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_EQ((*f32)->tensors().size(), (*bf16)->tensors().size());
  ASSERT_FALSE((*f32)->tensors().empty());

  size_t compared = 0;
  for (const TensorInfo& info : (*f32)->tensors()) {
    SCOPED_TRACE(info.name);
    const TensorInfo* other = (*bf16)->Find(info.name);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(info.dtype, DType::kF32);
    EXPECT_EQ(other->dtype, DType::kBF16);
    EXPECT_EQ(info.shape, other->shape);
    const auto f32_values = (*f32)->ReadFloat(info.name);
    ASSERT_TRUE(f32_values.ok()) << f32_values.status();
    const absl::Span<const uint8_t> raw = (*bf16)->RawBytes(*other);
    ASSERT_EQ(raw.size(), f32_values->data.size() * 2);
    // Bit-exact: every stored bfloat16 is the round-to-nearest-even of the
    // float32 value (what torch's .to(torch.bfloat16) does).
    size_t mismatches = 0;
    for (size_t i = 0; i < f32_values->data.size(); ++i) {
      uint16_t stored;
      std::memcpy(&stored, raw.data() + 2 * i, 2);
      if (stored != FloatToBFloat16(f32_values->data[i])) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u);
    compared += f32_values->data.size();
  }
  // Every stored element was compared: tensors tile the data section.
  EXPECT_EQ(compared * 4, (*f32)->tensors().back().data_end);
  EXPECT_EQ((*f32)->metadata(), (*bf16)->metadata());
}

TEST(SharedModelTest, OpensAsSingleFileCollection) {
  const std::string dir = testing::SharedPath("models/stories260K/hf-f32");
  QUANT_REQUIRE_SHARED(dir);
  auto collection = TensorCollection::Open(dir);
  ASSERT_TRUE(collection.ok()) << collection.status();
  EXPECT_FALSE((*collection)->sharded());
  const auto entries = (*collection)->Entries();
  ASSERT_FALSE(entries.empty());
  for (size_t i = 1; i < entries.size(); ++i) {
    EXPECT_LT(entries[i - 1].info->name, entries[i].info->name);
  }
  const auto entry = (*collection)->Find("model.embed_tokens.weight");
  ASSERT_NE(entry.info, nullptr);
  EXPECT_EQ(entry.info->shape.size(), 2u);
}

}  // namespace
}  // namespace quant
