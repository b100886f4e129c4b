// Chat rendering on top of the Jinja engine; see chat_template.h.
#include "core/template/chat_template.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"

namespace quant {
namespace {

constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token",
                                          "sep_token", "pad_token", "cls_token",
                                          "mask_token"};

std::string JsonTypeName(const nlohmann::ordered_json& j) {
  return j.type_name();
}

}  // namespace

absl::StatusOr<std::string> LoadChatTemplate(const std::string& tokenizer_dir,
                                             const std::string& name) {
  const std::string config_path =
      JoinPath(tokenizer_dir, "tokenizer_config.json");
  std::vector<std::string> names;
  if (FileExists(config_path)) {
    QUANT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path));
    QUANT_ASSIGN_OR_RETURN(nlohmann::json config,
                           ParseJsonFile(text, config_path));
    if (config.is_object() && config.contains("chat_template")) {
      const nlohmann::json& t = config["chat_template"];
      if (t.is_string()) {
        if (name == "default") return t.get<std::string>();
        names.push_back("default");
      } else if (t.is_array()) {
        for (const nlohmann::json& entry : t) {
          if (!entry.is_object() || !entry.contains("name") ||
              !entry["name"].is_string() || !entry.contains("template") ||
              !entry["template"].is_string()) {
            return absl::InvalidArgumentError(absl::StrCat(
                config_path,
                ": chat_template entries must be {\"name\", \"template\"} "
                "objects of strings"));
          }
          if (entry["name"].get<std::string>() == name) {
            return entry["template"].get<std::string>();
          }
          names.push_back(entry["name"].get<std::string>());
        }
      } else if (!t.is_null()) {
        return absl::InvalidArgumentError(absl::StrCat(
            config_path, ": chat_template must be a string or a list"));
      }
    }
  }
  const std::string file =
      name == "default"
          ? JoinPath(tokenizer_dir, "chat_template.jinja")
          : JoinPath(JoinPath(tokenizer_dir, "additional_chat_templates"),
                     name + ".jinja");
  if (FileExists(file)) return ReadFileToString(file);
  return absl::NotFoundError(absl::StrCat(
      "no chat template named '", name, "' in ", tokenizer_dir,
      " (looked at tokenizer_config.json chat_template and ", file, ")",
      names.empty()
          ? ""
          : absl::StrCat("; templates there: ", absl::StrJoin(names, ", "))));
}

absl::Status ValidateConversation(const nlohmann::ordered_json& conversation) {
  if (!conversation.is_object()) {
    return absl::InvalidArgumentError(
        "conversation: must be a JSON object with \"messages\"");
  }
  auto messages = conversation.find("messages");
  if (messages == conversation.end() || !messages->is_array()) {
    return absl::InvalidArgumentError(
        "conversation: \"messages\" must be an array");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    const std::string where = absl::StrCat("conversation: messages[", i, "]");
    if (!m.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": must be an object, got ", JsonTypeName(m)));
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".role: must be a string"));
    }
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".role: '", r,
                       "' is not one of system, user, assistant, tool"));
    }
    auto tool_calls = m.find("tool_calls");
    bool has_tool_calls = tool_calls != m.end() && !tool_calls->is_null();
    if (has_tool_calls) {
      if (!tool_calls->is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".tool_calls: must be an array"));
      }
      for (size_t j = 0; j < tool_calls->size(); ++j) {
        if (!(*tool_calls)[j].is_object()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".tool_calls[", j, "]: must be an object"));
        }
      }
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (!has_tool_calls) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".content: ", content == m.end() ? "missing" : "null",
            " (allowed only with tool_calls)"));
      }
    } else if (!content->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".content: must be a string, got ", JsonTypeName(*content)));
    }
  }
  auto tools = conversation.find("tools");
  if (tools != conversation.end() && !tools->is_null() && !tools->is_array()) {
    return absl::InvalidArgumentError(
        "conversation: \"tools\" must be an array");
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::ordered_json> BuildChatContext(
    const nlohmann::ordered_json& conversation,
    const nlohmann::json& tokenizer_config, const ChatRenderOptions& options) {
  QUANT_RETURN_IF_ERROR(ValidateConversation(conversation));
  if (!options.tools.is_null() && !options.tools.is_array()) {
    return absl::InvalidArgumentError("chat options: tools must be an array");
  }
  if (!options.extra_context.is_null() && !options.extra_context.is_object()) {
    return absl::InvalidArgumentError(
        "chat options: extra_context must be an object");
  }
  nlohmann::ordered_json messages = conversation["messages"];
  if (options.system_prompt) {
    bool has_system = false;
    for (const auto& m : messages) has_system |= m["role"] == "system";
    if (!has_system) {
      nlohmann::ordered_json system = nlohmann::ordered_json::object();
      system["role"] = "system";
      system["content"] = *options.system_prompt;
      messages.insert(messages.begin(), std::move(system));
    }
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = std::move(messages);
  context["add_generation_prompt"] = options.add_generation_prompt;
  nlohmann::ordered_json tools = options.tools;
  if (tools.is_null() && conversation.contains("tools")) {
    tools = conversation["tools"];
  }
  context["tools"] = std::move(tools);
  context["documents"] = nullptr;
  if (tokenizer_config.is_object()) {
    for (const char* key : kSpecialTokens) {
      auto it = tokenizer_config.find(key);
      if (it == tokenizer_config.end()) continue;
      std::string value;
      if (it->is_string()) {
        value = it->get<std::string>();
      } else if (it->is_object() && it->contains("content") &&
                 (*it)["content"].is_string()) {
        value = (*it)["content"].get<std::string>();
      }
      if (!value.empty()) context[key] = value;
    }
  }
  if (options.extra_context.is_object()) {
    for (const auto& [key, value] : options.extra_context.items()) {
      context[key] = value;
    }
  }
  return context;
}

absl::StatusOr<std::string> RenderChat(
    const Template& chat_template, const nlohmann::ordered_json& conversation,
    const nlohmann::json& tokenizer_config, const ChatRenderOptions& options) {
  QUANT_ASSIGN_OR_RETURN(
      nlohmann::ordered_json context,
      BuildChatContext(conversation, tokenizer_config, options));
  return chat_template.Render(context, options.render);
}

absl::StatusOr<std::string> RenderChat(const Template& chat_template,
                                       const nlohmann::json& conversation,
                                       const nlohmann::json& tokenizer_config,
                                       const ChatRenderOptions& options) {
  return RenderChat(chat_template, nlohmann::ordered_json(conversation),
                    tokenizer_config, options);
}

}  // namespace quant
