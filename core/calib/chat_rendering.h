// Conversations rendered to the text a runtime would feed the model: the
// chat template (the tokenizer's own, or a file), the system prompt and the
// generation prompt chosen once, then applied to every conversation of a
// calibration set or of `quantctl tokenize --messages`. The seed documents'
// point: templated and untemplated text produce different activations, so
// calibration should see what the runtime will send.
#ifndef QUANT_CORE_CALIB_CHAT_RENDERING_H_
#define QUANT_CORE_CALIB_CHAT_RENDERING_H_

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/template/jinja_template.h"
#include "nlohmann/json.hpp"

namespace quant {

// How conversations are rendered (recipe calibration.chat_template,
// system_prompt, add_generation_prompt).
struct ChatTemplateChoice {
  // "auto": the tokenizer's chat template (tokenizer_config.json's
  // chat_template, or chat_template.jinja), none when it has none;
  // "none": conversations are refused; anything else: a template file (a
  // path or a file:/// URI).
  std::string chat_template = "auto";
  // Inserted as the first message of a conversation without one.
  std::optional<std::string> system_prompt;
  bool add_generation_prompt = false;
};

// Where a template came from, for manifests and messages.
struct ChatTemplateOrigin {
  std::string source;  // "tokenizer_config.json", "chat_template.jinja", a path
  std::string sha256;  // Of the template text.
};

// What strftime_now() sees while rendering calibration text: fixed, so that
// the same recipe and set give the same tokens on any day and any worker.
std::tm FixedRenderDate();

class ChatRenderer {
 public:
  // The renderer `choice` asks for with the tokenizer in `tokenizer_dir`;
  // null when there is none ("none", or "auto" and the tokenizer has no
  // template). Errors: a template file that cannot be read (over 1 MiB, or
  // missing) or parsed (the message names its line and column), a
  // tokenizer_config.json that is not JSON.
  static absl::StatusOr<std::unique_ptr<ChatRenderer>> Load(
      const std::string& tokenizer_dir, const ChatTemplateChoice& choice);

  // Renders one conversation, the JSON object text of a document or file:
  // {"messages": [...], "tools": [...]?}. Errors name the message and field
  // or the template's line and column.
  absl::StatusOr<std::string> Render(absl::string_view conversation_json) const;

  const ChatTemplateOrigin& origin() const { return origin_; }
  const ChatTemplateChoice& choice() const { return choice_; }

 private:
  ChatRenderer(Template chat_template, nlohmann::json tokenizer_config,
               ChatTemplateChoice choice, ChatTemplateOrigin origin)
      : template_(std::move(chat_template)),
        tokenizer_config_(std::move(tokenizer_config)),
        choice_(std::move(choice)),
        origin_(std::move(origin)) {}

  Template template_;
  nlohmann::json tokenizer_config_;
  ChatTemplateChoice choice_;
  ChatTemplateOrigin origin_;
};

}  // namespace quant

#endif  // QUANT_CORE_CALIB_CHAT_RENDERING_H_
