// SendCheckpointFile (server/artifact_download.h): a published checkpoint's
// files in chunks from an offset, only those its manifest lists, never
// through a symlink, and the errors of each bad request.
#include "server/artifact_download.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant::server {
namespace {

using ::testing::HasSubstr;

class ArtifactDownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    for (int i = 0; i < 3000; ++i) big_ += static_cast<char>(i % 251);
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/model.safetensors", big_).ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/secret.txt", "not listed").ok());
    ASSERT_EQ(::symlink((dir_ + "/secret.txt").c_str(),
                        (dir_ + "/linked.json").c_str()),
              0);
    manifest_ =
        nlohmann::json{
            {"output",
             {{"files",
               {{{"name", "model.safetensors"},
                 {"bytes", big_.size()},
                 {"sha256", Sha256Hex(big_)}},
                {{"name", "linked.json"}, {"bytes", 10}, {"sha256", "x"}},
                {{"name", "gone.bin"}, {"bytes", 1}, {"sha256", "y"}}}}}}}
            .dump();
  }

  // The chunks of `file` from `offset`, or the error.
  absl::Status Get(const std::string& file, int64_t offset,
                   std::vector<v1::ArtifactChunk>* chunks) {
    return SendCheckpointFile(dir_, manifest_, file, offset, 1024,
                              [chunks](const v1::ArtifactChunk& chunk) {
                                chunks->push_back(chunk);
                                return true;
                              });
  }

  std::string dir_;
  std::string big_;
  std::string manifest_;
};

TEST_F(ArtifactDownloadTest, AListedFileInChunksFromAnOffset) {
  std::vector<v1::ArtifactChunk> chunks;
  ASSERT_TRUE(Get("model.safetensors", 0, &chunks).ok());
  ASSERT_EQ(chunks.size(), 3u);
  std::string joined;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset(), static_cast<int64_t>(i * 1024));
    EXPECT_EQ(chunks[i].file_size(), 3000);
    EXPECT_EQ(chunks[i].sha256(), Sha256Hex(big_));
    EXPECT_EQ(chunks[i].file(), "model.safetensors");
    joined += chunks[i].data();
  }
  EXPECT_EQ(joined, big_);

  chunks.clear();
  ASSERT_TRUE(Get("model.safetensors", 2500, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].data(), big_.substr(2500));
  // At the end: one empty chunk says so.
  chunks.clear();
  ASSERT_TRUE(Get("model.safetensors", 3000, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0].data().empty());
  chunks.clear();
  const absl::Status past = Get("model.safetensors", 3001, &chunks);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_EQ(Get("model.safetensors", -1, &chunks).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ArtifactDownloadTest, TheManifestItself) {
  for (const char* name : {"", "manifest.json"}) {
    std::vector<v1::ArtifactChunk> chunks;
    ASSERT_TRUE(Get(name, 0, &chunks).ok());
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].data(), manifest_);
    EXPECT_EQ(chunks[0].file(), "manifest.json");
    EXPECT_EQ(chunks[0].sha256(), Sha256Hex(manifest_));
  }
}

// The manifest's signature, when quantd signs; NotFound when it does not.
TEST_F(ArtifactDownloadTest, TheSignatureWhenSigned) {
  std::vector<v1::ArtifactChunk> chunks;
  const absl::Status unsigned_status = Get("manifest.json.sig", 0, &chunks);
  EXPECT_EQ(unsigned_status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unsigned_status.message(), HasSubstr("not signed"));
  ASSERT_TRUE(
      WriteFileAtomically(dir_ + "/manifest.json.sig", "{\"sig\": 1}").ok());
  ASSERT_TRUE(Get("manifest.json.sig", 0, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].data(), "{\"sig\": 1}");
  EXPECT_EQ(chunks[0].sha256(), Sha256Hex("{\"sig\": 1}"));
}

TEST_F(ArtifactDownloadTest, OnlyListedPlainRegularFiles) {
  std::vector<v1::ArtifactChunk> chunks;
  for (const char* name :
       {"secret.txt", "../secret.txt", "quantd.db", "/etc/passwd"}) {
    const absl::Status status = Get(name, 0, &chunks);
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << name;
    EXPECT_THAT(status.message(), HasSubstr("not a file of this checkpoint"))
        << name;
  }
  // Listed, but a symlink (to a file beside it) or gone: damaged.
  for (const char* name : {"linked.json", "gone.bin"}) {
    const absl::Status status = Get(name, 0, &chunks);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << name << status;
    EXPECT_THAT(status.message(), HasSubstr(name));
  }
  EXPECT_TRUE(chunks.empty()) << "refused requests sent bytes";
  manifest_ = "not json";
  EXPECT_EQ(Get("model.safetensors", 0, &chunks).code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(ArtifactDownloadTest, StopsWhenTheClientGoesAway) {
  int sent = 0;
  const absl::Status status = SendCheckpointFile(
      dir_, manifest_, "model.safetensors", 0, 1024,
      [&sent](const v1::ArtifactChunk&) { return ++sent < 2; });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(sent, 2);
}

}  // namespace
}  // namespace quant::server
