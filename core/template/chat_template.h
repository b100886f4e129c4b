// Chat rendering on top of the Jinja engine (core/template): loads a
// model's chat template and renders a conversation with the context that
// transformers / transformers.js apply_chat_template build:
//   messages               the conversation's messages (after the optional
//                          system prompt is inserted)
//   add_generation_prompt  from the options
//   tools                  the tool list, or null when none is given (both
//                          transformers implementations pass tools=None)
//   documents              null (no retrieval documents)
//   bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
//   mask_token             from tokenizer_config.json, each a string or an
//                          object with "content"; left out when absent,
//                          null or empty
//   ...extra_context       every member, replacing any of the above
// Templates that call strftime_now render the current date unless the
// caller sets `date_string` (Llama 3.x) in extra_context or
// RenderOptions::now.
#ifndef QUANT_CORE_TEMPLATE_CHAT_TEMPLATE_H_
#define QUANT_CORE_TEMPLATE_CHAT_TEMPLATE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/template/jinja_template.h"
#include "nlohmann/json.hpp"

namespace quant {

// The chat template of the tokenizer in `tokenizer_dir`: tokenizer_config's
// "chat_template" (a string, which is the "default" one, or a list of
// {"name", "template"} objects), else the file chat_template.jinja (for
// "default") or additional_chat_templates/<name>.jinja. NotFound when there
// is none of that name.
absl::StatusOr<std::string> LoadChatTemplate(
    const std::string& tokenizer_dir, const std::string& name = "default");

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  // Inserted as the first message when the conversation has no system
  // message.
  std::optional<std::string> system_prompt;
  // Tools (a JSON array) for the template; null: the conversation's own
  // "tools", if any.
  nlohmann::ordered_json tools;
  // Further variables (e.g. enable_thinking, date_string); an object or null.
  nlohmann::ordered_json extra_context;
  jinja::RenderOptions render;
};

// Checks `conversation` ({"messages": [...], optional "tools": [...]}):
// each message an object whose "role" is system, user, assistant or tool
// and whose "content" is a string, or null/absent when it has "tool_calls"
// (a list of objects). InvalidArgument naming the message index and field.
absl::Status ValidateConversation(const nlohmann::ordered_json& conversation);

// The context described above (validates first).
absl::StatusOr<nlohmann::ordered_json> BuildChatContext(
    const nlohmann::ordered_json& conversation,
    const nlohmann::json& tokenizer_config, const ChatRenderOptions& options);

// Validates, builds the context and renders `chat_template`.
absl::StatusOr<std::string> RenderChat(
    const Template& chat_template, const nlohmann::ordered_json& conversation,
    const nlohmann::json& tokenizer_config, const ChatRenderOptions& options);
// The same for a nlohmann::json conversation (object members sorted by
// key, which shows where a template prints tools or arguments as JSON).
absl::StatusOr<std::string> RenderChat(const Template& chat_template,
                                       const nlohmann::json& conversation,
                                       const nlohmann::json& tokenizer_config,
                                       const ChatRenderOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_TEMPLATE_CHAT_TEMPLATE_H_
