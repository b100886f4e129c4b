// Tokenizer components on small hand-written tokenizer.json files: merge
// order, unknown tokens, byte fallback, added-token options, Metaspace,
// decoders, and the errors for malformed or unsupported files.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/text/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/status_matchers.h"

namespace quant {
namespace {

using ::quant::testing::IsOkAndHolds;

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A byte-level-free BPE over letters, with no normaliser or pre-tokenizer.
json BaseTokenizer() {
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Fuse"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab",
         {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}}},
        {"merges", json::array({"a b", "ab c", "b c"})}}},
  };
}

std::unique_ptr<Tokenizer> Load(const json& tokenizer,
                                const json& config = {}) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded = Tokenizer::FromJson(
      tokenizer.dump(), config.is_null() ? "" : config.dump());
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? *std::move(loaded) : nullptr;
}

std::string LoadError(const std::string& tokenizer_json,
                      const std::string& config_json = "") {
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
      Tokenizer::FromJson(tokenizer_json, config_json);
  EXPECT_FALSE(loaded.ok());
  return loaded.ok() ? "" : std::string(loaded.status().message());
}

TEST(BpeTest, MergesInRankOrder) {
  auto tokenizer = Load(BaseTokenizer());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("abc", false),
              IsOkAndHolds(ElementsAre(5)));  // a+b, ab+c
  json reordered = BaseTokenizer();
  // "b c" now outranks "a b": a|bc, and "a bc" is no merge.
  reordered["model"]["merges"] =
      json::array({json::array({"b", "c"}), json::array({"a", "b"})});
  auto other = Load(reordered);
  ASSERT_NE(other, nullptr);
  EXPECT_THAT(other->Encode("abc", false), IsOkAndHolds(ElementsAre(0, 4)));
  EXPECT_THAT(other->Decode(other->Encode("abcab", false).value(), false),
              IsOkAndHolds("abcab"));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  json config = BaseTokenizer();
  config["model"]["vocab"] = {{"a", 0}, {"aa", 1}};
  config["model"]["merges"] = json::array({"a a"});
  auto tokenizer = Load(config);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("aaa", false), IsOkAndHolds(ElementsAre(1, 0)));
}

TEST(BpeTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json config = BaseTokenizer();
  // "ac" is a token but no merge makes it.
  config["model"]["vocab"]["ac"] = 6;
  auto without = Load(config);
  ASSERT_NE(without, nullptr);
  EXPECT_THAT(without->Encode("ac", false), IsOkAndHolds(ElementsAre(0, 2)));
  config["model"]["ignore_merges"] = true;
  auto with = Load(config);
  ASSERT_NE(with, nullptr);
  EXPECT_THAT(with->Encode("ac", false), IsOkAndHolds(ElementsAre(6)));
}

TEST(BpeTest, UnknownCharactersUseUnkAndFuseUnk) {
  json config = BaseTokenizer();
  config["model"]["vocab"]["<unk>"] = 6;
  config["model"]["unk_token"] = "<unk>";
  auto separate = Load(config);
  ASSERT_NE(separate, nullptr);
  EXPECT_THAT(separate->Encode("axyc", false),
              IsOkAndHolds(ElementsAre(0, 6, 6, 2)));
  config["model"]["fuse_unk"] = true;
  auto fused = Load(config);
  ASSERT_NE(fused, nullptr);
  EXPECT_THAT(fused->Encode("axyc", false), IsOkAndHolds(ElementsAre(0, 6, 2)));
}

TEST(BpeTest, ByteFallbackSpellsUnknownCharactersAsBytes) {
  json config = BaseTokenizer();
  config["model"]["byte_fallback"] = true;
  config["model"]["vocab"]["<0xC3>"] = 10;
  config["model"]["vocab"]["<0xA9>"] = 11;
  config["decoder"] = {{"type", "Sequence"},
                       {"decoders", json::array({{{"type", "ByteFallback"}},
                                                 {{"type", "Fuse"}}})}};
  auto tokenizer = Load(config);
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<int32_t> ids =
      tokenizer->Encode("a\xC3\xA9", false).value();  // "aé"
  EXPECT_THAT(ids, ElementsAre(0, 10, 11));
  EXPECT_THAT(tokenizer->Decode(ids, false), IsOkAndHolds("a\xC3\xA9"));
  // A lone continuation byte is not UTF-8: one U+FFFD per byte token.
  EXPECT_THAT(tokenizer->Decode(std::vector<int32_t>{11, 0}, false),
              IsOkAndHolds("\xEF\xBF\xBD"
                           "a"));
}

TEST(AddedTokensTest, SplitFirstAndHonourStripOptions) {
  json config = BaseTokenizer();
  config["added_tokens"] = json::array({{{"id", 7},
                                         {"content", "<x>"},
                                         {"special", true},
                                         {"normalized", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"single_word", false}},
                                        {{"id", 8},
                                         {"content", "<y>"},
                                         {"special", false},
                                         {"normalized", false},
                                         {"lstrip", true},
                                         {"rstrip", true},
                                         {"single_word", false}},
                                        {{"id", 9},
                                         {"content", "ab"},
                                         {"special", false},
                                         {"normalized", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"single_word", true}}});
  config["model"]["vocab"][" "] = 6;
  auto tokenizer = Load(config);
  ASSERT_NE(tokenizer, nullptr);
  // "<x>" is cut out; the spaces around "<y>" are swallowed by it.
  EXPECT_THAT(tokenizer->Encode("a<x>b  <y>  c", false),
              IsOkAndHolds(ElementsAre(0, 7, 1, 8, 2)));
  // single_word: "ab" alone is the added token, inside "abc" it is not.
  EXPECT_THAT(tokenizer->Encode("ab abc", false),
              IsOkAndHolds(ElementsAre(9, 6, 5)));
  EXPECT_THAT(tokenizer->Decode(std::vector<int32_t>{0, 7, 1}, false),
              IsOkAndHolds("a<x>b"));
  EXPECT_THAT(tokenizer->Decode(std::vector<int32_t>{0, 7, 8}, true),
              IsOkAndHolds("a<y>"));
  EXPECT_TRUE(tokenizer->IsSpecial(7));
  EXPECT_FALSE(tokenizer->IsSpecial(8));
  EXPECT_EQ(*tokenizer->TokenToId("<y>"), 8);
  EXPECT_EQ(tokenizer->vocab_size(), 10);
}

TEST(MetaspaceTest, ReplacesSpacesAndPrependsTheMarker) {
  json config = BaseTokenizer();
  config["model"]["vocab"] = {{"\xE2\x96\x81"
                               "ab",
                               0},
                              {"\xE2\x96\x81"
                               "c",
                               1},
                              {"\xE2\x96\x81", 2},
                              {"a", 3},
                              {"b", 4},
                              {"c", 5},
                              {"ab", 6}};
  config["model"]["merges"] =
      json::array({json::array({"a", "b"}), json::array({"\xE2\x96\x81", "ab"}),
                   json::array({"\xE2\x96\x81", "c"})});
  config["pre_tokenizer"] = {{"type", "Metaspace"},
                             {"replacement", "\xE2\x96\x81"},
                             {"prepend_scheme", "always"},
                             {"split", true}};
  config["decoder"] = {{"type", "Metaspace"},
                       {"replacement", "\xE2\x96\x81"},
                       {"prepend_scheme", "always"},
                       {"split", true}};
  auto tokenizer = Load(config);
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<int32_t> ids = tokenizer->Encode("ab c", false).value();
  EXPECT_THAT(ids, ElementsAre(0, 1));
  EXPECT_THAT(tokenizer->Decode(ids, false), IsOkAndHolds("ab c"));
}

TEST(PostProcessorTest, TemplateAddsSpecialTokensOnlyWhenAsked) {
  json config = BaseTokenizer();
  config["added_tokens"] = json::array({{{"id", 6},
                                         {"content", "<s>"},
                                         {"special", true},
                                         {"normalized", false}},
                                        {{"id", 7},
                                         {"content", "</s>"},
                                         {"special", true},
                                         {"normalized", false}}});
  config["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                    {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {6}}, {"tokens", {"<s>"}}}},
        {"</s>", {{"id", "</s>"}, {"ids", {7}}, {"tokens", {"</s>"}}}}}}};
  auto tokenizer = Load(
      config, json{{"bos_token", {{"content", "<s>"}}}, {"eos_token", "</s>"}});
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("ab", true),
              IsOkAndHolds(ElementsAre(6, 3, 7)));
  EXPECT_THAT(tokenizer->Encode("ab", false), IsOkAndHolds(ElementsAre(3)));
  EXPECT_THAT(tokenizer->Encode("", true), IsOkAndHolds(ElementsAre(6, 7)));
  EXPECT_EQ(tokenizer->bos_id(), 6);
  EXPECT_EQ(tokenizer->eos_id(), 7);
  EXPECT_THAT(tokenizer->Decode(std::vector<int32_t>{6, 3, 7}, true),
              IsOkAndHolds("ab"));
}

// A Split pattern that exhausts PCRE2's match limit on a text used to end
// the split there silently, so the rest of the text was tokenized as one
// word (tokens the tokenizer does not define). Now encoding fails.
TEST(PreTokenizerTest, SplitPatternThatGivesUpIsAnError) {
  json config = BaseTokenizer();
  config["pre_tokenizer"] = {{"type", "Split"},
                             {"pattern", {{"Regex", "b|(a|a)*[^ab]"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}};
  auto tokenizer = Load(config);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("bab", false),
              IsOkAndHolds(ElementsAre(1, 0, 1)));
  absl::StatusOr<std::vector<int32_t>> ids =
      tokenizer->Encode("b" + std::string(40, 'a'), false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(ids.status().message(), HasSubstr("gave up at byte 1"));
}

// The same for a Replace normaliser and a Replace decoder.
TEST(NormalizerTest, ReplacePatternThatGivesUpIsAnError) {
  json config = BaseTokenizer();
  config["normalizer"] = {{"type", "Replace"},
                          {"pattern", {{"Regex", "(a|a)*[^abc]"}}},
                          {"content", "c"}};
  config["decoder"] = {{"type", "Replace"},
                       {"pattern", {{"Regex", "(a|a)*[^abc]"}}},
                       {"content", "c"}};
  config["model"]["vocab"][std::string(40, 'a')] = 6;
  auto tokenizer = Load(config);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("abc", false), IsOkAndHolds(ElementsAre(5)));
  EXPECT_EQ(tokenizer->Encode(std::string(40, 'a'), false).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(tokenizer->Decode(std::vector<int32_t>{6}, false).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(LoadErrorsTest, BadJson) {
  EXPECT_THAT(LoadError("{\"model\": "),
              HasSubstr("tokenizer.json: not valid JSON"));
  EXPECT_THAT(LoadError(BaseTokenizer().dump(), "[1,"),
              HasSubstr("tokenizer_config.json: not valid JSON"));
}

// Nesting 20,000 levels deep once crashed a worker (recursion) and 5,000
// took 434 MB; now it is refused at the limit, naming the file.
TEST(LoadErrorsTest, DeepNestingIsRefusedNamingTheFile) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  json config = BaseTokenizer();
  const std::string text = config.dump();
  const std::string nested =
      text.substr(0, text.size() - 1) + ", \"extra\": " + deep + "}";
  EXPECT_THAT(LoadError(nested),
              HasSubstr("tokenizer.json: not valid JSON: nested deeper than "
                        "64 levels"));
  EXPECT_THAT(LoadError(text, "{\"x\": " + deep + "}"),
              HasSubstr("tokenizer_config.json: not valid JSON: nested "
                        "deeper than 64 levels"));
}

TEST(LoadErrorsTest, UnknownModelType) {
  json config = BaseTokenizer();
  config["model"]["type"] = "WordPiece";
  EXPECT_THAT(LoadError(config.dump()),
              HasSubstr("model: unsupported model type 'WordPiece'"));
}

TEST(LoadErrorsTest, UnknownPreTokenizerNamesItsPath) {
  json config = BaseTokenizer();
  config["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "ByteLevel"}, {"use_regex", false}},
                    {{"type", "Frobnicate"}}})}};
  EXPECT_THAT(LoadError(config.dump()),
              HasSubstr("pre_tokenizer.pretokenizers[1]: unsupported "
                        "pre-tokenizer type 'Frobnicate'"));
}

TEST(LoadErrorsTest, UnsupportedNormalizerAndDecoder) {
  json config = BaseTokenizer();
  config["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", json::array({{{"type", "Lowercase"}}})}};
  EXPECT_THAT(LoadError(config.dump()),
              HasSubstr("normalizer.normalizers[0]: unsupported normalizer "
                        "type 'Lowercase'"));
  config = BaseTokenizer();
  config["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THAT(LoadError(config.dump()),
              HasSubstr("decoder: unsupported decoder type 'WordPiece'"));
}

TEST(LoadErrorsTest, BadRegexAndBadFields) {
  json config = BaseTokenizer();
  config["pre_tokenizer"] = {{"type", "Split"},
                             {"pattern", {{"Regex", "(unclosed"}}},
                             {"behavior", "Isolated"}};
  EXPECT_THAT(LoadError(config.dump()), HasSubstr("pre_tokenizer.pattern:"));
  config = BaseTokenizer();
  config["model"]["merges"] = json::array({"a z"});
  EXPECT_THAT(LoadError(config.dump()),
              HasSubstr("model.merges[0]: token 'z' is not in the vocabulary"));
  config = BaseTokenizer();
  config["model"]["vocab"]["a"] = "zero";
  EXPECT_THAT(LoadError(config.dump()), HasSubstr("model.vocab[\"a\"]"));
  config = BaseTokenizer();
  config["model"]["byte_fallback"] = "yes";
  EXPECT_THAT(LoadError(config.dump()),
              HasSubstr("model.byte_fallback: expected true or false"));
  EXPECT_THAT(LoadError(BaseTokenizer().dump(), "{\"bos_token\": \"<nope>\"}"),
              HasSubstr("tokenizer_config.json: bos_token: '<nope>' is not"));
}

TEST(LoadErrorsTest, MissingDirectory) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
      Tokenizer::LoadFromDirectory("/nonexistent/tokenizer/dir");
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("tokenizer.json"));
}

}  // namespace
}  // namespace quant

namespace quant {
namespace {

// Found by tokenizer_json_fuzzer: a template adding an id that no token has
// would make Encode return ids outside the vocabulary.
TEST(PostProcessorTest, TemplateIdOutsideVocabularyIsRefused) {
  json tokenizer = BaseTokenizer();
  tokenizer["post_processor"] = json::parse(R"({
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [9], "tokens": ["<s>"]}}
  })");
  EXPECT_THAT(LoadError(tokenizer.dump()),
              HasSubstr("post_processor: special token id 9 is not in the "
                        "vocabulary"));
}

}  // namespace
}  // namespace quant
