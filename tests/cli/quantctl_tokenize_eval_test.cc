// Runs the built quantctl program: `tokenize` (encode, decode, JSON) and
// `eval` (the llama2.c reference NLL of stories260K, a bf16 checkpoint
// against its f32 reference), their help, and their exit codes (0 ok,
// 1 error, 2 usage).
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::QuantctlPath;
using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;

using ::nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json ParseJson(const std::string& text) {
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = quant::testing::MakeTempDir() + "/" + name;
  EXPECT_TRUE(WriteFileAtomically(path, contents).ok()) << path;
  return path;
}

class QuantctlTokenizeEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(quant::testing::PathExists(QuantctlPath()))
        << QuantctlPath() << " is not built (target quantctl)";
  }

  // Loads shared/models/stories260K/reference.json into reference_ (callers
  // check that it exists with QUANT_REQUIRE_SHARED first).
  void LoadReference() {
    const absl::StatusOr<std::string> text = ReadFileToString(reference_path_);
    ASSERT_TRUE(text.ok()) << text.status();
    reference_ = ParseJson(*text);
    ASSERT_FALSE(reference_.is_discarded()) << reference_path_;
  }

  const std::string f32_ =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  const std::string bf16_ =
      quant::testing::SharedPath("models/stories260K/hf-bf16");
  const std::string reference_path_ =
      quant::testing::SharedPath("models/stories260K/reference.json");
  const std::string tinystories_ =
      quant::testing::SharedPath("data/tinystories_val.txt");
  json reference_;
};

// ---------------------------------------------------------------- tokenize

TEST_F(QuantctlTokenizeEvalTest, TokenizeTextPrintsIdAndTokenPerLine) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(reference_path_);
  LoadReference();
  const RunResult result =
      RunQuantctl("tokenize --tokenizer " + Quote(f32_) + " --text " +
                  Quote(reference_["prompt"].get<std::string>()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<int> ids;
  for (absl::string_view line :
       absl::StrSplit(result.out, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> fields = absl::StrSplit(line, '\t');
    ASSERT_EQ(fields.size(), 2u) << line;
    ids.push_back(std::stoi(fields[0]));
  }
  EXPECT_EQ(ids, reference_["prompt_ids_with_bos"].get<std::vector<int>>());
  EXPECT_THAT(result.out, HasSubstr("\t<s>\n"));
}

TEST_F(QuantctlTokenizeEvalTest, TokenizeJsonMatchesReferenceIds) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(reference_path_);
  LoadReference();
  const std::vector<int> expected =
      reference_["prompt_ids_with_bos"].get<std::vector<int>>();
  RunResult result =
      RunQuantctl("tokenize --json --tokenizer " + Quote(f32_) + " --text " +
                  Quote(reference_["prompt"].get<std::string>()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  EXPECT_EQ(output["ids"].get<std::vector<int>>(), expected);
  EXPECT_EQ(output["count"], expected.size());
  ASSERT_EQ(output["tokens"].size(), expected.size());
  EXPECT_EQ(output["tokens"][0], "<s>");
  // SentencePiece style: the first word carries the "▁" space marker.
  EXPECT_EQ(output["tokens"][1].get<std::string>().rfind("\xE2\x96\x81", 0), 0u)
      << output["tokens"][1];

  // --no_special: the same ids without the BOS.
  result =
      RunQuantctl("tokenize --json --no_special --tokenizer " + Quote(f32_) +
                  " --text " + Quote(reference_["prompt"].get<std::string>()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  EXPECT_EQ(output["ids"].get<std::vector<int>>(),
            std::vector<int>(expected.begin() + 1, expected.end()));
}

TEST_F(QuantctlTokenizeEvalTest, DecodeRoundTrip) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(reference_path_);
  LoadReference();
  const std::vector<int> ids =
      reference_["prompt_ids_with_bos"].get<std::vector<int>>();
  const std::string prompt = reference_["prompt"];

  // Comma-separated, special tokens skipped: exactly the prompt.
  RunResult result =
      RunQuantctl("tokenize --tokenizer " + Quote(f32_) + " --decode " +
                  Quote(absl::StrJoin(ids, ",")) + " --skip_special --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  EXPECT_EQ(output["text"], prompt);

  // A pasted JSON array, special tokens kept, text output.
  result = RunQuantctl("tokenize --tokenizer " + Quote(f32_) + " --decode " +
                       Quote("[" + absl::StrJoin(ids, ", ") + "]"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("<s>"));
  EXPECT_THAT(result.out, HasSubstr(prompt + "\n"));

  // A whole paragraph through --file and back.
  QUANT_REQUIRE_SHARED(tinystories_);
  const std::string all = ReadFileToString(tinystories_).value_or("");
  const std::string paragraph = all.substr(0, all.find("\n\n"));
  ASSERT_GT(paragraph.size(), 100u);
  const std::string path = WriteTemp("paragraph.txt", paragraph);
  result = RunQuantctl("tokenize --json --tokenizer " + Quote(f32_) +
                       " --file " + Quote(path));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  const std::vector<int> paragraph_ids = output["ids"].get<std::vector<int>>();
  ASSERT_GT(paragraph_ids.size(), 10u);
  result =
      RunQuantctl("tokenize --json --skip_special --tokenizer " + Quote(f32_) +
                  " --decode " + Quote(absl::StrJoin(paragraph_ids, " ")));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  EXPECT_EQ(output["text"], paragraph);
}

TEST_F(QuantctlTokenizeEvalTest, ByteLevelTokenizerRoundTripsUtf8) {
  const std::string qwen3 = quant::testing::SharedPath("tokenizers/qwen3");
  QUANT_REQUIRE_SHARED(qwen3);
  const std::string text = "Hello world, h\xC3\xA9llo \xF0\x9F\x99\x82";
  RunResult result = RunQuantctl("tokenize --json --tokenizer " + Quote(qwen3) +
                                 " --text " + Quote(text));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  const std::vector<int> ids = output["ids"].get<std::vector<int>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(output["count"], ids.size());
  // GPT-2 byte mapping: a space-prefixed word starts with "\xC4\xA0" (Ġ).
  EXPECT_EQ(output["tokens"][1], "\xC4\xA0world");

  result = RunQuantctl("tokenize --json --tokenizer " + Quote(qwen3) +
                       " --decode " + Quote(absl::StrJoin(ids, ",")));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  EXPECT_EQ(output["text"], text);
}

TEST_F(QuantctlTokenizeEvalTest, TokenizeUsageErrorsExitTwo) {
  RunResult result = RunQuantctl("tokenize --text hello");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--tokenizer DIR is required"));
  EXPECT_THAT(result.err, HasSubstr("Usage: quantctl tokenize"));

  result = RunQuantctl("tokenize --tokenizer /tmp --text hello --file x.txt");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("exclude each other"));

  result = RunQuantctl("tokenize --tokenizer /tmp");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err,
              HasSubstr("give one of --text, --file, --messages or --decode"));

  result = RunQuantctl("tokenize --tokenizer /tmp --text hi extra");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("expected at most 0 arguments"));
}

TEST_F(QuantctlTokenizeEvalTest, TokenizeErrorsExitOne) {
  const std::string missing = quant::testing::MakeTempDir() + "/no-tokenizer";
  RunResult result =
      RunQuantctl("tokenize --tokenizer " + Quote(missing) + " --text hi");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(missing));
  EXPECT_TRUE(result.out.empty()) << result.out;

  QUANT_REQUIRE_SHARED(f32_);
  // A malformed id list is a bad command line; an id the tokenizer does not
  // know is a failure against that tokenizer.
  result =
      RunQuantctl("tokenize --tokenizer " + Quote(f32_) + " --decode 1,abc");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("\"abc\" is not a token id"));

  result =
      RunQuantctl("tokenize --tokenizer " + Quote(f32_) + " --decode 1,99999");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("id 99999 is not in the tokenizer's"));

  result = RunQuantctl("tokenize --tokenizer " + Quote(f32_) +
                       " --text hi --skip_special");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--skip_special applies to --decode"));
}

// -------------------------------------------------------------------- eval

TEST_F(QuantctlTokenizeEvalTest, EvalReproducesReferenceNll) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  QUANT_REQUIRE_SHARED(reference_path_);
  LoadReference();
  constexpr int kSeqLen = 256;
  const RunResult result =
      RunQuantctl("eval --checkpoint " + Quote(f32_) + " --text " +
                  Quote(tinystories_) + " --max_documents 300 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  const double nll = output["nll"];
  std::printf(
      "stories260K f32, 300 paragraphs: nll %.10f (reference %.10f), "
      "ppl %.6f, %d tokens scored\n",
      nll, reference_["mean_nll_first300_paragraphs"].get<double>(),
      output["perplexity"].get<double>(), output["tokens"].get<int>());
  EXPECT_NEAR(nll, reference_["mean_nll_first300_paragraphs"].get<double>(),
              1e-4);
  // The reference's token count is the number of positions it scored.
  EXPECT_EQ(output["tokens"], reference_["tokens_first300"]);
  // Every position but the last of each window is scored; each paragraph
  // has at least one window of its own.
  const int64_t windows = output["windows"];
  EXPECT_GE(windows, 300);
  EXPECT_EQ(output["tokens"].get<int64_t>(),
            output["input_tokens"].get<int64_t>() - windows);
  EXPECT_EQ(output["packing"], "document");
  EXPECT_NEAR(output["perplexity"].get<double>(), std::exp(nll), 1e-9);
  EXPECT_EQ(output["documents"], 300);
  EXPECT_EQ(output["seq_len"], kSeqLen);
  EXPECT_EQ(output["checkpoint"], f32_);
  EXPECT_EQ(output["text_sha256"],
            Sha256Hex(ReadFileToString(tinystories_).value_or("")));
  EXPECT_FALSE(output.contains("ppl_ratio")) << "no --reference was given";

  // Concatenated (40 documents, to stay quick): one stream cut every
  // kSeqLen tokens.
  const RunResult concatenated = RunQuantctl(
      "eval --checkpoint " + Quote(f32_) + " --text " + Quote(tinystories_) +
      " --max_documents 40 --packing concatenate --json");
  ASSERT_EQ(concatenated.exit_code, 0) << concatenated.err;
  const json joined = ParseJson(concatenated.out);
  ASSERT_FALSE(joined.is_discarded()) << concatenated.out;
  const int64_t input_tokens = joined["input_tokens"];
  EXPECT_GT(input_tokens, 2 * kSeqLen);
  EXPECT_EQ(joined["windows"], (input_tokens + kSeqLen - 1) / kSeqLen);
  EXPECT_EQ(joined["tokens"], input_tokens - joined["windows"].get<int64_t>());
  EXPECT_EQ(joined["packing"], "concatenate");
  std::printf("concatenated: nll %.10f over %d tokens\n",
              joined["nll"].get<double>(), joined["tokens"].get<int>());
}

TEST_F(QuantctlTokenizeEvalTest, EvalContinuesPromptsSideBySide) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(bf16_);
  QUANT_REQUIRE_SHARED(tinystories_);
  const RunResult result = RunQuantctl(
      "eval --checkpoint " + Quote(bf16_) + " --reference " + Quote(f32_) +
      " --text " + Quote(tinystories_) +
      " --max_windows 3 --prompt 'Once upon a time' --max_new_tokens 16 "
      "--json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  EXPECT_EQ(output["windows"], 3);
  ASSERT_EQ(output["continuations"].size(), 1u);
  const json& c = output["continuations"][0];
  EXPECT_EQ(c["prompt"], "Once upon a time");
  EXPECT_EQ(c["ids"].size(), 16u);
  EXPECT_EQ(c["reference_ids"].size(), 16u);
  // bf16 and f32 stories260K agree on at least the start of the story.
  EXPECT_GE(c["agreeing_prefix"].get<int>(), 4);
  EXPECT_THAT(c["reference_text"].get<std::string>(),
              HasSubstr("there was a little girl"));
  // Not a terminal, and --json: no progress line.
  EXPECT_THAT(result.err, Not(HasSubstr("[eval]")));

  const RunResult text =
      RunQuantctl("eval --checkpoint " + Quote(f32_) + " --text " +
                  Quote(tinystories_) + " --max_windows 2 --prompt 'The cat'");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("prompt      The cat"));
  EXPECT_THAT(text.out, HasSubstr("windows               2 of seq_len"));
}

TEST_F(QuantctlTokenizeEvalTest, EvalAgainstReference) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(bf16_);
  QUANT_REQUIRE_SHARED(tinystories_);
  const RunResult result = RunQuantctl(
      "eval --checkpoint " + Quote(bf16_) + " --reference " + Quote(f32_) +
      " --text " + Quote(tinystories_) + " --max_documents 100 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json output = ParseJson(result.out);
  ASSERT_FALSE(output.is_discarded()) << result.out;
  const double ratio = output["ppl_ratio"];
  const double kl = output["mean_kl"];
  const double agreement = output["top1_agreement"];
  std::printf(
      "bf16 vs f32 reference: ppl %.6f vs %.6f, ratio %.6f, "
      "mean KL %.3g, top-1 agreement %.4f\n",
      output["perplexity"].get<double>(),
      output["reference_perplexity"].get<double>(), ratio, kl, agreement);
  EXPECT_NEAR(output["reference_perplexity"].get<double>(),
              std::exp(output["reference_nll"].get<double>()), 1e-9);
  EXPECT_NEAR(ratio,
              output["perplexity"].get<double>() /
                  output["reference_perplexity"].get<double>(),
              1e-9);
  // Loose bounds: bf16 weights (8 mantissa bits) perturb every logit a
  // little, so KL is positive but small and the argmax rarely changes.
  EXPECT_GT(kl, 0.0);
  EXPECT_LT(kl, 0.05);
  EXPECT_GT(agreement, 0.9);
  EXPECT_LE(agreement, 1.0);
  EXPECT_LT(std::fabs(ratio - 1.0), 0.05);
  EXPECT_EQ(output["reference"], f32_);
}

TEST_F(QuantctlTokenizeEvalTest, EvalModelAgainstItselfIsExact) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  // Text output this time; 20 documents keep it quick.
  const RunResult result = RunQuantctl(
      "eval --checkpoint " + Quote(f32_) + " --reference " + Quote(f32_) +
      " --text " + Quote(tinystories_) + " --max_documents 20 --seq_len 64");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("ppl ratio             1.000000"));
  EXPECT_THAT(result.out, HasSubstr("top-1 agreement       1.0000"));
  EXPECT_THAT(result.out, HasSubstr("documents             20\n"));
  EXPECT_THAT(result.out, HasSubstr("of seq_len 64"));
}

TEST_F(QuantctlTokenizeEvalTest, EvalJsonlTextAndIdsAgree) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(reference_path_);
  LoadReference();
  // The same document as text and as input_ids (BOS included, since id
  // documents get none added) must score the same. Evaluation strips text
  // documents, so the text is given stripped.
  const std::string text(
      absl::StripAsciiWhitespace(reference_["greedy_text"].get<std::string>()));
  RunResult result = RunQuantctl("tokenize --json --tokenizer " + Quote(f32_) +
                                 " --text " + Quote(text));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json ids = ParseJson(result.out)["ids"];
  const std::string text_file =
      WriteTemp("text.jsonl", json{{"text", text}}.dump() + "\n");
  const std::string ids_file =
      WriteTemp("ids.jsonl", json{{"input_ids", ids}}.dump() + "\n");

  result = RunQuantctl("eval --json --checkpoint " + Quote(f32_) + " --text " +
                       Quote(text_file) + " --seq_len 32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json from_text = ParseJson(result.out);
  result = RunQuantctl("eval --json --checkpoint " + Quote(f32_) + " --text " +
                       Quote(ids_file) + " --seq_len 32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json from_ids = ParseJson(result.out);
  ASSERT_FALSE(from_text.is_discarded() || from_ids.is_discarded());
  EXPECT_EQ(from_text["input_tokens"], ids.size());
  EXPECT_EQ(from_ids["input_tokens"], ids.size());
  EXPECT_EQ(from_text["tokens"], from_ids["tokens"]);
  EXPECT_DOUBLE_EQ(from_text["nll"].get<double>(),
                   from_ids["nll"].get<double>());
  EXPECT_NE(from_text["text_sha256"], from_ids["text_sha256"]);
}

TEST_F(QuantctlTokenizeEvalTest, EvalUsageErrorsExitTwo) {
  RunResult result = RunQuantctl("eval --text x.txt");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--checkpoint DIR is required"));

  result = RunQuantctl("eval --checkpoint /tmp");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--text FILE is required"));

  result = RunQuantctl("eval --checkpoint /tmp --text x.txt --seq_len 1");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--seq_len must be at least 2, got 1"));

  result = RunQuantctl("eval --checkpoint /tmp --text x.txt --seq_len many");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("bad value for --seq_len"));

  result =
      RunQuantctl("eval --checkpoint /tmp --text x.txt --max_documents -3");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--max_documents must not be negative"));
}

TEST_F(QuantctlTokenizeEvalTest, EvalErrorsExitOne) {
  QUANT_REQUIRE_SHARED(f32_);
  QUANT_REQUIRE_SHARED(tinystories_);
  const std::string missing = quant::testing::MakeTempDir() + "/no-model";
  RunResult result = RunQuantctl("eval --checkpoint " + Quote(missing) +
                                 " --text " + Quote(tinystories_));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(missing));
  EXPECT_TRUE(result.out.empty()) << result.out;

  result = RunQuantctl("eval --checkpoint " + Quote(f32_) + " --reference " +
                       Quote(missing) + " --text " + Quote(tinystories_));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(missing));

  const std::string bad_jsonl = WriteTemp(
      "bad.jsonl", "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \n");
  result = RunQuantctl("eval --checkpoint " + Quote(f32_) + " --text " +
                       Quote(bad_jsonl));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("line 3: invalid JSON"));
  EXPECT_THAT(result.err, HasSubstr(bad_jsonl));

  const std::string missing_text = missing + ".txt";
  result = RunQuantctl("eval --checkpoint " + Quote(f32_) + " --text " +
                       Quote(missing_text));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(missing_text));

  // Longer than the model's 512 positions: a failure for this model, not a
  // malformed command line.
  result =
      RunQuantctl("eval --checkpoint " + Quote(f32_) + " --text " +
                  Quote(tinystories_) + " --max_documents 30 --seq_len 1024");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("max_position_embeddings 512"));
}

TEST_F(QuantctlTokenizeEvalTest, HelpListsCommandsAndFlags) {
  RunResult result = RunQuantctl("--help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("tokenize"));
  EXPECT_THAT(result.out, HasSubstr("eval"));

  result = RunQuantctl("tokenize --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("Usage: quantctl tokenize --tokenizer"));
  EXPECT_THAT(result.out, HasSubstr("ID<TAB>TOKEN"));
  for (const char* flag : {"--tokenizer", "--text", "--file", "--decode",
                           "--no_special", "--skip_special", "--json"}) {
    EXPECT_THAT(result.out, HasSubstr(flag));
  }
  EXPECT_THAT(result.out, ::testing::Not(HasSubstr("--checkpoint")));

  result = RunQuantctl("eval --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("Usage: quantctl eval --checkpoint"));
  for (const char* flag : {"--checkpoint", "--text", "--reference", "--seq_len",
                           "--max_documents", "--json"}) {
    EXPECT_THAT(result.out, HasSubstr(flag));
  }
  EXPECT_THAT(result.out, ::testing::Not(HasSubstr("--tokenizer")));
}

// --messages renders a conversation with the tokenizer's chat template as
// @huggingface/jinja does (tests/fixtures/template/reference.json, made with
// the same Qwen3 template) and encodes it with the template's special
// tokens parsed as special and none added.
TEST_F(QuantctlTokenizeEvalTest, MessagesRenderLikeTheReferenceTemplate) {
  const std::string qwen3 = quant::testing::SharedPath("tokenizers/qwen3");
  QUANT_REQUIRE_SHARED(qwen3);
  const std::string fixtures = quant::testing::FixturesDir() + "/template";
  absl::StatusOr<std::string> conversations_text =
      ReadFileToString(fixtures + "/conversations.json");
  absl::StatusOr<std::string> reference_text =
      ReadFileToString(fixtures + "/reference.json");
  ASSERT_TRUE(conversations_text.ok()) << conversations_text.status();
  ASSERT_TRUE(reference_text.ok()) << reference_text.status();
  const nlohmann::ordered_json conversations =
      nlohmann::ordered_json::parse(*conversations_text);
  const json reference = ParseJson(*reference_text);
  int compared = 0;
  int refused = 0;
  for (const json& c : reference.at("cases")) {
    if (c.at("template") != "qwen3") continue;
    // Each run loads Qwen3's 150k-token vocabulary: every conversation with
    // the generation prompt, one without.
    if (!c.at("add_generation_prompt").get<bool>() &&
        c.at("conversation") != "plain") {
      continue;
    }
    nlohmann::ordered_json conversation;
    for (const auto& candidate : conversations.at("conversations")) {
      if (candidate.at("name").get<std::string>() ==
          c.at("conversation").get<std::string>()) {
        conversation = candidate;
      }
    }
    ASSERT_FALSE(conversation.is_null()) << c.dump();
    conversation.erase("name");
    const std::string file =
        WriteTemp("conversation.json", conversation.dump());
    const bool prompt = c.at("add_generation_prompt").get<bool>();
    const RunResult result = RunQuantctl(
        "tokenize --tokenizer " + Quote(qwen3) + " --messages " + Quote(file) +
        (prompt ? " --add_generation_prompt" : "") + " --json");
    SCOPED_TRACE(c.dump());
    if (c.contains("error")) {
      EXPECT_EQ(result.exit_code, 1) << result.out;
      ++refused;
      continue;
    }
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const json output = ParseJson(result.out);
    ASSERT_FALSE(output.is_discarded()) << result.out;
    EXPECT_EQ(output.at("text"), c.at("output"));
    // <|im_start|> is one special token, not its characters; nothing added.
    ASSERT_FALSE(output.at("ids").empty());
    EXPECT_EQ(output.at("ids")[0], 151644);
    EXPECT_EQ(output.at("count"), output.at("ids").size());
    ++compared;
  }
  EXPECT_GE(compared, 10);
  EXPECT_GE(refused, 1);
}

TEST_F(QuantctlTokenizeEvalTest, MessagesOptionsAndErrors) {
  const std::string qwen3 = quant::testing::SharedPath("tokenizers/qwen3");
  QUANT_REQUIRE_SHARED(qwen3);
  const std::string list = WriteTemp(
      "list.json", R"([{"role": "user", "content": "Once upon a time"}])");
  // A bare list of messages; a system prompt goes first; the text form
  // prints the rendering and then one token per line.
  RunResult result =
      RunQuantctl("tokenize --tokenizer " + Quote(qwen3) + " --messages " +
                  Quote(list) + " --system_prompt 'Tell stories.'");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("<|im_start|>system\nTell stories.<|im_end|>\n"
                        "<|im_start|>user\nOnce upon a time<|im_end|>\n"));
  EXPECT_THAT(result.out, HasSubstr("tokens ("));
  EXPECT_THAT(result.out, HasSubstr("151644\t<|im_start|>\n"));
  EXPECT_THAT(result.out, Not(HasSubstr("<|im_start|>assistant")));

  // A template file of our own, with a line:column error in another.
  const std::string own = WriteTemp(
      "own.jinja",
      "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n"
      "{% endfor %}");
  result =
      RunQuantctl("tokenize --tokenizer " + Quote(qwen3) + " --messages " +
                  Quote(list) + " --chat_template " + Quote(own) + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ParseJson(result.out).at("text"), "[USER] Once upon a time\n");
  const std::string broken =
      WriteTemp("broken.jinja", "{{ messages }}\n{{ messages | shout }}");
  result = RunQuantctl("tokenize --tokenizer " + Quote(qwen3) + " --messages " +
                       Quote(list) + " --chat_template " + Quote(broken));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("2:"));
  EXPECT_THAT(result.err, HasSubstr("shout"));

  // A conversation that is not one names the message and field.
  const std::string robot = WriteTemp(
      "robot.json",
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]})");
  result = RunQuantctl("tokenize --tokenizer " + Quote(qwen3) + " --messages " +
                       Quote(robot));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("messages[1].role"));
  const std::string not_json = WriteTemp("bad.json", "{\"messages\": [");
  result = RunQuantctl("tokenize --tokenizer " + Quote(qwen3) + " --messages " +
                       Quote(not_json));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("not valid JSON"));

  // stories260K has no chat template.
  const std::string stories =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  result = RunQuantctl("tokenize --tokenizer " + Quote(stories) +
                       " --messages " + Quote(list));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("has no chat template"));

  // Usage: the template options without --messages, two inputs at once.
  for (const std::string& flags :
       {std::string("--text hi --add_generation_prompt"),
        std::string("--text hi --system_prompt x"),
        "--text hi --messages " + Quote(list),
        "--messages " + Quote(list) + " --no_special",
        "--messages " + Quote(list) + " --chat_template none"}) {
    result = RunQuantctl("tokenize --tokenizer " + Quote(qwen3) + " " + flags);
    EXPECT_EQ(result.exit_code, 2) << flags << "\n" << result.err;
  }
}

}  // namespace
}  // namespace quant
