// Chat templates applied to conversations; see chat_rendering.h.
#include "core/calib/chat_rendering.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/template/chat_template.h"

namespace quant {
namespace {

// Real chat templates are a few KiB; a larger file is not one.
constexpr size_t kMaxTemplateBytes = size_t{1} << 20;
constexpr size_t kMaxTokenizerConfigBytes = size_t{64} << 20;

}  // namespace

std::tm FixedRenderDate() {
  std::tm date = {};
  date.tm_year = 2026 - 1900;
  date.tm_mon = 0;
  date.tm_mday = 1;
  date.tm_wday = 4;  // A Thursday.
  return date;
}

absl::StatusOr<std::unique_ptr<ChatRenderer>> ChatRenderer::Load(
    const std::string& tokenizer_dir, const ChatTemplateChoice& choice) {
  if (choice.chat_template == "none") return nullptr;
  nlohmann::json config = nlohmann::json::object();
  const std::string config_path =
      JoinPath(tokenizer_dir, "tokenizer_config.json");
  if (FileExists(config_path)) {
    QUANT_ASSIGN_OR_RETURN(
        const std::string text,
        ReadFileToString(config_path, kMaxTokenizerConfigBytes));
    QUANT_ASSIGN_OR_RETURN(config, ParseJsonFile(text, config_path));
  }
  std::string source;
  ChatTemplateOrigin origin;
  if (choice.chat_template == "auto") {
    absl::StatusOr<std::string> text = LoadChatTemplate(tokenizer_dir);
    if (absl::IsNotFound(text.status())) return nullptr;
    if (!text.ok()) return text.status();
    source = *std::move(text);
    const bool in_config = config.is_object() &&
                           config.contains("chat_template") &&
                           !config["chat_template"].is_null();
    origin.source = in_config ? "tokenizer_config.json" : "chat_template.jinja";
  } else {
    std::string path = choice.chat_template;
    if (absl::StartsWith(path, kFileUriScheme)) {
      QUANT_ASSIGN_OR_RETURN(path,
                             FileUriPath(path, "calibration.chat_template"));
    }
    absl::StatusOr<std::string> text =
        ReadFileToString(path, kMaxTemplateBytes);
    if (!text.ok()) {
      return absl::Status(
          text.status().code(),
          absl::StrCat("calibration.chat_template: ", text.status().message()));
    }
    source = *std::move(text);
    origin.source = choice.chat_template;
  }
  origin.sha256 = Sha256Hex(source);
  absl::StatusOr<Template> parsed = Template::Parse(source);
  if (!parsed.ok()) {
    return absl::Status(
        parsed.status().code(),
        absl::StrCat("calibration.chat_template (", origin.source,
                     "): ", parsed.status().message()));
  }
  return std::unique_ptr<ChatRenderer>(new ChatRenderer(
      *std::move(parsed), std::move(config), choice, std::move(origin)));
}

absl::StatusOr<std::string> ChatRenderer::Render(
    absl::string_view conversation_json) const {
  // Bounded like every untrusted document first; then read again keeping
  // member order, which shows where a template prints tools as JSON.
  QUANT_RETURN_IF_ERROR(
      ParseJsonFile(conversation_json, "conversation").status());
  const nlohmann::ordered_json conversation = nlohmann::ordered_json::parse(
      conversation_json, nullptr, /*allow_exceptions=*/false);
  if (conversation.is_discarded()) {
    return absl::InvalidArgumentError("conversation: not valid JSON");
  }
  ChatRenderOptions options;
  options.add_generation_prompt = choice_.add_generation_prompt;
  options.system_prompt = choice_.system_prompt;
  options.render.now = FixedRenderDate();
  return RenderChat(template_, conversation, tokenizer_config_, options);
}

}  // namespace quant
