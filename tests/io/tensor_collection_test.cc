// Tests for TensorCollection: single-file and sharded checkpoints, and every
// way an index can disagree with its shards.
#include "core/io/tensor_collection.h"

#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(float));
}

class TensorCollectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
  }

  void WriteShard(const std::string& file,
                  const std::vector<std::string>& names) {
    std::vector<std::string> data;
    for (size_t i = 0; i < names.size(); ++i) {
      data.push_back(FloatBytes({static_cast<float>(i), 2.0f * i + 1}));
    }
    std::vector<TensorToWrite> tensors;
    for (size_t i = 0; i < names.size(); ++i) {
      tensors.push_back({names[i], DType::kF32, {2}, data[i]});
    }
    ASSERT_TRUE(WriteSafetensors(JoinPath(dir_, file), tensors).ok());
  }

  void WriteIndex(const std::string& text) {
    ASSERT_TRUE(WriteFileAtomically(
                    JoinPath(dir_, "model.safetensors.index.json"), text)
                    .ok());
  }

  // The usual two-shard layout: a, b in shard 1; c in shard 2.
  void WriteTwoShards() {
    WriteShard("model-00001-of-00002.safetensors", {"a", "b"});
    WriteShard("model-00002-of-00002.safetensors", {"c"});
  }

  absl::Status OpenStatus() { return TensorCollection::Open(dir_).status(); }

  std::string dir_;
};

constexpr char kGoodIndex[] = R"({
  "metadata": {"total_size": 24},
  "weight_map": {
    "a": "model-00001-of-00002.safetensors",
    "b": "model-00001-of-00002.safetensors",
    "c": "model-00002-of-00002.safetensors"
  }
})";

TEST_F(TensorCollectionTest, ReadsShardedCheckpoint) {
  WriteTwoShards();
  WriteIndex(kGoodIndex);
  auto collection = TensorCollection::Open(dir_);
  ASSERT_TRUE(collection.ok()) << collection.status();
  EXPECT_TRUE((*collection)->sharded());
  EXPECT_EQ((*collection)->files().size(), 2u);
  std::vector<std::string> names;
  for (const auto& entry : (*collection)->Entries()) {
    names.push_back(entry.info->name);
  }
  EXPECT_THAT(names, ::testing::ElementsAre("a", "b", "c"));
  const auto c = (*collection)->Find("c");
  ASSERT_NE(c.info, nullptr);
  EXPECT_THAT(c.file->path(), HasSubstr("model-00002-of-00002"));
  auto b = (*collection)->ReadFloat("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->data, ::testing::ElementsAre(1.0f, 3.0f));
  EXPECT_EQ((*collection)->Find("zzz").info, nullptr);
  EXPECT_EQ((*collection)->ReadFloat("zzz").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(TensorCollectionTest, ReadsSingleFile) {
  WriteShard("model.safetensors", {"x", "y"});
  auto collection = TensorCollection::Open(dir_);
  ASSERT_TRUE(collection.ok()) << collection.status();
  EXPECT_FALSE((*collection)->sharded());
  EXPECT_EQ((*collection)->Entries().size(), 2u);
  EXPECT_THAT((*collection)->ReadFloat("x")->data,
              ::testing::ElementsAre(0.0f, 1.0f));
}

TEST_F(TensorCollectionTest, MissingDirectoryOrFilesAreNotFound) {
  const std::string missing = JoinPath(dir_, "nope");
  absl::Status status = TensorCollection::Open(missing).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(missing));

  status = OpenStatus();  // Empty directory.
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("model.safetensors"));
  EXPECT_THAT(status.message(), HasSubstr(dir_));
}

TEST_F(TensorCollectionTest, IndexNamingMissingShardIsNotFound) {
  WriteShard("model-00001-of-00002.safetensors", {"a", "b"});
  WriteIndex(kGoodIndex);
  const absl::Status status = OpenStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("model-00002-of-00002.safetensors"));
  EXPECT_THAT(status.message(), HasSubstr("\"c\""));
}

TEST_F(TensorCollectionTest, TensorMissingFromItsShard) {
  WriteShard("model-00001-of-00002.safetensors", {"a"});
  WriteShard("model-00002-of-00002.safetensors", {"c", "b"});
  WriteIndex(kGoodIndex);
  const absl::Status status = OpenStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("tensor \"b\" is listed in shard "
                        "model-00001-of-00002.safetensors but that file does "
                        "not contain it"));
}

TEST_F(TensorCollectionTest, ShardNamesMustStayInsideTheDirectory) {
  WriteTwoShards();
  for (const std::string shard :
       {"../evil.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    WriteIndex(R"({"weight_map": {"a": ")" + shard + R"("}})");
    const absl::Status status = OpenStatus();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << shard;
    EXPECT_THAT(status.message(), HasSubstr("not a plain file name")) << shard;
    EXPECT_THAT(status.message(), HasSubstr("\"a\"")) << shard;
  }
}

TEST_F(TensorCollectionTest, DuplicateTensorAcrossShards) {
  WriteShard("model-00001-of-00002.safetensors", {"a", "b"});
  WriteShard("model-00002-of-00002.safetensors", {"c", "a"});
  WriteIndex(kGoodIndex);
  const absl::Status status = OpenStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("tensor \"a\" is stored in two shards"));
}

TEST_F(TensorCollectionTest, DuplicateTensorInIndex) {
  WriteTwoShards();
  WriteIndex(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                "a": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(OpenStatus().message(), HasSubstr("duplicate key \"a\""));
}

TEST_F(TensorCollectionTest, TensorInShardButNotInIndex) {
  WriteTwoShards();
  WriteIndex(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                "c": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(OpenStatus().message(),
              HasSubstr("tensor \"b\" in shard model-00001-of-00002."
                        "safetensors is not listed in \"weight_map\""));
}

TEST_F(TensorCollectionTest, BadIndexJson) {
  WriteTwoShards();
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"weight_map\": {", "is not valid JSON"},
           {"[1]", "must hold a JSON object"},
           {"{}", "\"weight_map\" must be an object"},
           {R"({"weight_map": []})", "\"weight_map\" must be an object"},
           {R"({"weight_map": {"a": 3}})",
            "entry for tensor \"a\" must be a string"},
       }) {
    WriteIndex(c.text);
    const absl::Status status = OpenStatus();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(status.message(), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(status.message(), HasSubstr("model.safetensors.index.json"));
  }
}

TEST_F(TensorCollectionTest, MalformedShardErrorNamesTheShard) {
  WriteTwoShards();
  ASSERT_TRUE(WriteFileAtomically(
                  JoinPath(dir_, "model-00002-of-00002.safetensors"), "xx")
                  .ok());
  WriteIndex(kGoodIndex);
  const absl::Status status = OpenStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("model-00002-of-00002.safetensors"));
}

}  // namespace
}  // namespace quant
