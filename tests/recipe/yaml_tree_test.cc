// core/recipe/yaml_tree: libyaml events to nodes, with positions, and the
// refusals that keep a document from expanding or recursing without bound.
#include "core/recipe/yaml_tree.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

TEST(YamlTreeTest, ReadsMappingsSequencesAndScalarsWithPositions) {
  auto docs = ParseYamlDocuments(
      "bits: 4\nname: \"4\"\nlist: [a, 'b']\nempty:\ntilde: ~\n", "r.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 1u);
  const YamlNode& root = (*docs)[0];
  ASSERT_TRUE(root.IsMap());
  ASSERT_EQ(root.entries.size(), 5u);
  EXPECT_EQ(root.entries[0].first.scalar, "bits");
  EXPECT_EQ(root.entries[0].second.scalar, "4");
  EXPECT_FALSE(root.entries[0].second.quoted);
  EXPECT_TRUE(root.entries[1].second.quoted);  // A string, not a number.
  EXPECT_EQ(root.entries[1].second.mark.line, 1);
  EXPECT_EQ(root.entries[1].second.mark.column, 6);
  const YamlNode& list = root.entries[2].second;
  ASSERT_TRUE(list.IsSequence());
  ASSERT_EQ(list.items.size(), 2u);
  EXPECT_EQ(list.items[1].scalar, "b");
  EXPECT_TRUE(root.entries[3].second.IsNull());
  EXPECT_TRUE(root.entries[4].second.IsNull());
}

TEST(YamlTreeTest, CountsDocuments) {
  auto docs = ParseYamlDocuments("a: 1\n---\nb: 2\n", "r.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_EQ(docs->size(), 2u);
  docs = ParseYamlDocuments("", "r.yaml");
  ASSERT_TRUE(docs.ok());
  EXPECT_TRUE(docs->empty());
}

TEST(YamlTreeTest, RefusesAnchorsAliasesAndTags) {
  for (const char* text : {"a: &x 1\nb: *x\n", "a: !!str 1\n", "a: &x [1, 2]\n",
                           "? !t a\n: 1\n"}) {
    auto docs = ParseYamlDocuments(text, "r.yaml");
    ASSERT_FALSE(docs.ok()) << text;
    EXPECT_THAT(docs.status().message(), HasSubstr("anchors, aliases and tags"))
        << text;
  }
}

TEST(YamlTreeTest, BoundsNestingAndReportsSyntaxErrorsWithPosition) {
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  auto docs = ParseYamlDocuments(deep, "deep.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(), HasSubstr("nested deeper than 32"));
  docs = ParseYamlDocuments(std::string(31, '[') + std::string(31, ']'),
                            "ok.yaml");
  EXPECT_TRUE(docs.ok()) << docs.status();

  docs = ParseYamlDocuments("a: [1, 2\nb: 3\n", "bad.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(), HasSubstr("bad.yaml:"));
  EXPECT_THAT(docs.status().message(), HasSubstr("invalid YAML"));
}

}  // namespace
}  // namespace quant
