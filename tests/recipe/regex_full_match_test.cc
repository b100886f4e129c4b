// Regex::FullMatch (core/base/regex.h), which recipe patterns rely on: the
// whole name must match, trying every alternative, not just the leftmost
// match that FindAll would report.
#include <memory>
#include <string>

#include "core/base/regex.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

std::unique_ptr<Regex> MustCompile(const std::string& pattern) {
  absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status();
  return regex.ok() ? *std::move(regex) : nullptr;
}

TEST(RegexFullMatchTest, WholeTextOnly) {
  std::unique_ptr<Regex> head = MustCompile("lm_head");
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(head->FullMatch("lm_head"));
  EXPECT_FALSE(head->FullMatch("model.lm_head"));
  EXPECT_FALSE(head->FullMatch("lm_head2"));
  EXPECT_FALSE(head->FullMatch(""));
  // FindAll still finds substrings: FullMatch is what differs.
  EXPECT_EQ(head->FindAll("model.lm_head").size(), 1u);
}

TEST(RegexFullMatchTest, TriesLaterAlternatives) {
  // The leftmost match of "a|ab" in "ab" is "a"; a full match needs "ab".
  std::unique_ptr<Regex> alternatives = MustCompile("a|ab");
  ASSERT_NE(alternatives, nullptr);
  EXPECT_TRUE(alternatives->FullMatch("ab"));
  EXPECT_TRUE(alternatives->FullMatch("a"));
  EXPECT_FALSE(alternatives->FullMatch("abc"));
}

TEST(RegexFullMatchTest, LayerNamePatterns) {
  std::unique_ptr<Regex> down = MustCompile("model\\.layers\\.0\\..*down_proj");
  ASSERT_NE(down, nullptr);
  EXPECT_TRUE(down->FullMatch("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(down->FullMatch("model.layers.10.mlp.down_proj"));
  EXPECT_FALSE(down->FullMatch("model.layers.0.mlp.down_proj.weight"));
  std::unique_ptr<Regex> any = MustCompile(".*");
  ASSERT_NE(any, nullptr);
  EXPECT_TRUE(any->FullMatch("anything at all"));
  EXPECT_FALSE(any->FullMatch("bad \xff utf-8"));
}

TEST(RegexFullMatchTest, InvalidUtf8PatternIsAnError) {
  EXPECT_FALSE(Regex::Compile("lm_\xc3").ok());
}

}  // namespace
}  // namespace quant
