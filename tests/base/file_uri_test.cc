// FileUriPath: the one reading of file:// URIs (quantd, workers, recipes).
#include "core/base/file_uri.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

TEST(FileUriTest, AbsolutePathsAreReturnedAsWritten) {
  absl::StatusOr<std::string> path =
      FileUriPath("file:///srv/models/a b", "checkpoint_uri");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, "/srv/models/a b");
}

TEST(FileUriTest, EveryOtherFormIsRefusedNamingTheField) {
  const struct {
    std::string uri;
    std::string why;
  } kCases[] = {
      {"", "required"},
      {"/srv/models", "is not a file:// URI"},
      {"s3://bucket/x", "is not a file:// URI"},
      {"file://host/srv", "no host part"},
      {"file://", "no host part"},
      {"file:///srv/x?y=1", "query, fragment or NUL"},
      {"file:///srv/x#top", "query, fragment or NUL"},
      {std::string("file:///srv/x\0y", 15), "query, fragment or NUL"},
  };
  for (const auto& c : kCases) {
    absl::StatusOr<std::string> path = FileUriPath(c.uri, "work_uri");
    ASSERT_FALSE(path.ok()) << c.uri;
    EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(path.status().message(), HasSubstr("work_uri: "));
    EXPECT_THAT(path.status().message(), HasSubstr(c.why)) << c.uri;
  }
}

TEST(FileUriTest, LongUrisAreCutInMessages) {
  const std::string uri = "http://" + std::string(1000, 'x');
  absl::StatusOr<std::string> path = FileUriPath(uri, "artifact_uri");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(path.status().message(), HasSubstr("(1007 characters)"));
  EXPECT_LT(path.status().message().size(), 400u);
}

}  // namespace
}  // namespace quant
