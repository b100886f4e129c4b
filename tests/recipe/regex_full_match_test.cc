// Regex::FullMatch (core/base/regex.h), which recipe patterns rely on: the
// whole name must match, trying every alternative, not just the leftmost
// match that FindAll would report.
#include <memory>
#include <string>
#include <vector>

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
  absl::StatusOr<std::vector<Regex::Match>> matches =
      head->FindAll("model.lm_head");
  ASSERT_TRUE(matches.ok()) << matches.status();
  EXPECT_EQ(matches->size(), 1u);
}

// FindAll used to stop at PCRE2's first error, so a pattern that gave up
// returned the matches found so far as if they were all of them.
TEST(RegexFindAllTest, GivingUpIsAnErrorNotFewerMatches) {
  // Nested alternatives over the same character, then a class the text
  // lacks: every split of the run of a's is tried before failing.
  std::unique_ptr<Regex> catastrophic = MustCompile("x|(a|a)*[^ax]");
  ASSERT_NE(catastrophic, nullptr);
  const std::string text = "x" + std::string(40, 'a');
  absl::StatusOr<std::vector<Regex::Match>> matches =
      catastrophic->FindAll(text);
  ASSERT_FALSE(matches.ok());
  EXPECT_EQ(matches.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(matches.status().message().find("pattern 'x|(a|a)*[^ax]' gave up "
                                            "at byte 1 of a 41-byte text"),
            std::string::npos)
      << matches.status();
  // The same pattern on a text it can finish with is fine.
  matches = catastrophic->FindAll("xx");
  ASSERT_TRUE(matches.ok()) << matches.status();
  EXPECT_EQ(matches->size(), 2u);
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
