// `quantctl tokenize`: load the tokenizer, encode --text / --file or decode
// --decode, print the result as text or JSON.
#include "client/tokenize_command.h"

#include <memory>
#include <ostream>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/common_flags.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/chat_rendering.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, tokenizer, "",
          "Directory holding tokenizer.json (and tokenizer_config.json for "
          "BOS/EOS), e.g. a checkpoint directory. Required.");
// One definition per program: `quantctl eval` declares and reuses this flag
// (there it names a file), so its help covers both commands.
ABSL_FLAG(std::string, text, "",
          "tokenize: the text to encode. eval: the file of documents to "
          "score (JSONL or blank-line-separated paragraphs).");
ABSL_FLAG(std::string, file, "",
          "Encode the whole contents of this file (instead of --text).");
ABSL_FLAG(std::string, decode, "",
          "Decode these ids instead of encoding: comma- or space-separated, "
          "optionally in [ ], e.g. \"1,403,407\".");
ABSL_FLAG(bool, no_special, false,
          "Encode without special tokens (no BOS added by the tokenizer's "
          "post-processor).");
ABSL_FLAG(bool, skip_special, false,
          "With --decode: leave special tokens (e.g. <s>) out of the text.");
ABSL_FLAG(std::string, messages, "",
          "Render this conversation file with the chat template and encode "
          "the result: a JSON object {\"messages\": [{\"role\", "
          "\"content\"}, ...], \"tools\": [...]?}, or a JSON array of "
          "messages.");
ABSL_FLAG(std::string, chat_template, "auto",
          "With --messages: \"auto\" (the tokenizer's chat template) or a "
          "template file, as the recipe's calibration.chat_template.");
ABSL_FLAG(std::string, system_prompt, "",
          "With --messages: a system message put first when the "
          "conversation has none (recipe calibration.system_prompt).");
ABSL_FLAG(bool, add_generation_prompt, false,
          "With --messages: end with the template's prompt for the "
          "assistant's reply (recipe calibration.add_generation_prompt).");

namespace quant {
namespace {

using nlohmann::json;

// A conversation file is one conversation; chat logs belong in a
// calibration set.
constexpr size_t kMaxConversationBytes = size_t{16} << 20;

// Tokens and decoded text may hold invalid UTF-8 (byte-fallback pieces);
// replace it rather than let json::dump throw.
std::string DumpJson(const json& value) {
  return value.dump(2, ' ', /*ensure_ascii=*/false,
                    json::error_handler_t::replace);
}

absl::Status RunDecode(const Tokenizer& tokenizer,
                       const CommandInvocation& invocation) {
  if (absl::GetFlag(FLAGS_no_special)) {
    return UsageError("--no_special applies to encoding, not to --decode");
  }
  absl::StatusOr<std::vector<int32_t>> ids =
      ParseTokenIdList(absl::GetFlag(FLAGS_decode));
  if (!ids.ok()) {
    return UsageError(absl::StrCat("--decode: ", ids.status().message()));
  }
  for (int32_t id : *ids) {
    if (!tokenizer.IdToToken(id).has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--decode: id ", id, " is not in the tokenizer's vocabulary [0, ",
          tokenizer.vocab_size(), ")"));
    }
  }
  QUANT_ASSIGN_OR_RETURN(
      const std::string text,
      tokenizer.Decode(*ids, absl::GetFlag(FLAGS_skip_special)));
  if (absl::GetFlag(FLAGS_json)) {
    *invocation.out << DumpJson(json{{"text", text}}) << "\n";
  } else {
    *invocation.out << text << "\n";
  }
  return absl::OkStatus();
}

// The conversation in --messages rendered with the chat template, as
// calibration renders its conversation documents.
absl::StatusOr<std::string> RenderMessages(const std::string& tokenizer_dir) {
  if (absl::GetFlag(FLAGS_no_special)) {
    return UsageError(
        "--no_special does not apply to --messages: the chat template "
        "writes the special tokens itself");
  }
  QUANT_ASSIGN_OR_RETURN(
      std::string conversation,
      ReadFileToString(absl::GetFlag(FLAGS_messages), kMaxConversationBytes));
  // A bare list of messages is the common form of a single conversation.
  const absl::string_view first =
      absl::StripLeadingAsciiWhitespace(conversation);
  if (!first.empty() && first.front() == '[') {
    conversation = absl::StrCat("{\"messages\": ", conversation, "}");
  }
  ChatTemplateChoice choice;
  choice.chat_template = absl::GetFlag(FLAGS_chat_template);
  if (choice.chat_template.empty() || choice.chat_template == "none") {
    return UsageError(
        "--chat_template: give \"auto\" or a template file with --messages");
  }
  if (!absl::GetFlag(FLAGS_system_prompt).empty()) {
    choice.system_prompt = absl::GetFlag(FLAGS_system_prompt);
  }
  choice.add_generation_prompt = absl::GetFlag(FLAGS_add_generation_prompt);
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ChatRenderer> renderer,
                         ChatRenderer::Load(tokenizer_dir, choice));
  if (renderer == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "the tokenizer in ", tokenizer_dir,
        " has no chat template (tokenizer_config.json chat_template or "
        "chat_template.jinja); name one with --chat_template FILE"));
  }
  absl::StatusOr<std::string> text = renderer->Render(conversation);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(absl::GetFlag(FLAGS_messages), ": ",
                                     text.status().message()));
  }
  return text;
}

absl::Status RunEncode(const Tokenizer& tokenizer, const std::string& dir,
                       const CommandInvocation& invocation) {
  if (absl::GetFlag(FLAGS_skip_special)) {
    return UsageError("--skip_special applies to --decode only");
  }
  const bool templated = !absl::GetFlag(FLAGS_messages).empty();
  if (!templated && (absl::GetFlag(FLAGS_chat_template) != "auto" ||
                     !absl::GetFlag(FLAGS_system_prompt).empty() ||
                     absl::GetFlag(FLAGS_add_generation_prompt))) {
    return UsageError(
        "--chat_template, --system_prompt and --add_generation_prompt "
        "apply to --messages only");
  }
  std::string text = absl::GetFlag(FLAGS_text);
  const std::string file = absl::GetFlag(FLAGS_file);
  if (!file.empty()) {
    QUANT_ASSIGN_OR_RETURN(text, ReadFileToString(file));
  }
  if (templated) {
    QUANT_ASSIGN_OR_RETURN(text, RenderMessages(dir));
  }
  // Rendered text carries its special tokens already (apply_chat_template
  // encodes it without adding any).
  QUANT_ASSIGN_OR_RETURN(
      const std::vector<int32_t> ids,
      tokenizer.Encode(text, /*add_special_tokens=*/!templated &&
                                 !absl::GetFlag(FLAGS_no_special)));
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    tokens.push_back(tokenizer.IdToToken(id).value_or(""));
  }
  if (absl::GetFlag(FLAGS_json)) {
    json result = json::object();
    if (templated) result["text"] = text;
    result["ids"] = ids;
    result["tokens"] = tokens;
    result["count"] = ids.size();
    *invocation.out << DumpJson(result) << "\n";
    return absl::OkStatus();
  }
  if (templated) {
    *invocation.out << "rendered text (" << text.size() << " bytes):\n"
                    << text << (absl::EndsWith(text, "\n") ? "" : "\n")
                    << "tokens (" << ids.size() << "):\n";
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    *invocation.out << ids[i] << "\t" << EscapeTokenForDisplay(tokens[i])
                    << "\n";
  }
  return absl::OkStatus();
}

absl::Status RunTokenize(const CommandInvocation& invocation) {
  const std::string dir = absl::GetFlag(FLAGS_tokenizer);
  if (dir.empty()) {
    return UsageError("--tokenizer DIR is required");
  }
  const int inputs = !absl::GetFlag(FLAGS_text).empty() +
                     !absl::GetFlag(FLAGS_file).empty() +
                     !absl::GetFlag(FLAGS_messages).empty() +
                     !absl::GetFlag(FLAGS_decode).empty();
  if (inputs == 0) {
    return UsageError("give one of --text, --file, --messages or --decode");
  }
  if (inputs > 1) {
    return UsageError(
        "--text, --file, --messages and --decode exclude each other; give "
        "one");
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                         Tokenizer::LoadFromDirectory(dir));
  if (!absl::GetFlag(FLAGS_decode).empty()) {
    return RunDecode(*tokenizer, invocation);
  }
  return RunEncode(*tokenizer, dir, invocation);
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseTokenIdList(absl::string_view text) {
  absl::string_view body = absl::StripAsciiWhitespace(text);
  if (!body.empty() && body.front() == '[') {
    if (body.back() != ']') {
      return absl::InvalidArgumentError("'[' without a closing ']'");
    }
    body = body.substr(1, body.size() - 2);
  }
  std::vector<int32_t> ids;
  for (absl::string_view item :
       absl::StrSplit(body, absl::ByAnyChar(", \t\n"), absl::SkipEmpty())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(item, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", item, "\" is not a token id (a non-negative ", "integer)"));
    }
    ids.push_back(id);
  }
  if (ids.empty()) return absl::InvalidArgumentError("no token ids given");
  return ids;
}

std::string EscapeTokenForDisplay(absl::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (const char c : token) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
        out += "\\\\";
        break;
      default: {
        const unsigned char byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02X", byte);
        } else {
          out += c;
        }
      }
    }
  }
  return out;
}

Command TokenizeCommand() {
  Command command;
  command.name = "tokenize";
  command.summary =
      "Encode text to token ids with a checkpoint's tokenizer, or decode ids "
      "back to text.";
  command.usage =
      "tokenize --tokenizer DIR (--text STR | --file F | --decode IDS | "
      "--messages FILE.json [--chat_template auto|FILE] [--system_prompt S] "
      "[--add_generation_prompt]) [--no_special] [--skip_special] [--json]";
  command.description =
      "Loads DIR/tokenizer.json (and tokenizer_config.json) and encodes\n"
      "--text or the contents of --file the way the Hugging Face tokenizers\n"
      "library does, special tokens (e.g. BOS) included unless --no_special.\n"
      "Text output: one token per line, \"ID<TAB>TOKEN\", the token string\n"
      "with control characters and backslashes escaped (\\n, \\t, \\xNN).\n"
      "--json: {\"ids\": [...], \"tokens\": [...], \"count\": N}.\n"
      "With --decode IDS it prints the decoded text instead (--json:\n"
      "{\"text\": \"...\"}); --skip_special drops special tokens. Ids outside\n"
      "the vocabulary are an error.\n"
      "With --messages FILE.json it renders the conversation with the\n"
      "tokenizer's chat template (or --chat_template FILE) the way\n"
      "calibration renders conversation documents (and transformers'\n"
      "apply_chat_template): --system_prompt first when the conversation has\n"
      "no system message, --add_generation_prompt at the end, strftime_now\n"
      "fixed at 2026-01-01. It prints the rendered text and then its tokens,\n"
      "encoded without adding special tokens (the template writes them);\n"
      "--json adds \"text\". Runs locally; no server.";
  command.example =
      "quantctl tokenize --tokenizer ../shared/models/stories260K/hf-f32 "
      "--text \"Once upon a time\" --json";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_tokenizer),
                   &absl::GetFlagReflectionHandle(FLAGS_text),
                   &absl::GetFlagReflectionHandle(FLAGS_file),
                   &absl::GetFlagReflectionHandle(FLAGS_decode),
                   &absl::GetFlagReflectionHandle(FLAGS_no_special),
                   &absl::GetFlagReflectionHandle(FLAGS_skip_special),
                   &absl::GetFlagReflectionHandle(FLAGS_messages),
                   &absl::GetFlagReflectionHandle(FLAGS_chat_template),
                   &absl::GetFlagReflectionHandle(FLAGS_system_prompt),
                   &absl::GetFlagReflectionHandle(FLAGS_add_generation_prompt),
                   &absl::GetFlagReflectionHandle(FLAGS_json)};
  command.min_args = 0;
  command.max_args = 0;
  command.run = RunTokenize;
  return command;
}

}  // namespace quant
