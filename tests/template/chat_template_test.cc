// Chat rendering: LoadChatTemplate (tokenizer_config.json string or named
// list, chat_template.jinja, NotFound), conversation validation errors
// naming the message index and field, the context (special tokens as
// strings or {"content"} objects, tools, system prompt insertion,
// extra_context), and the real Qwen3 and Llama 3 templates in ../shared.
#include "core/template/chat_template.h"

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "core/base/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::ordered_json;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(LoadChatTemplateTest, ReadsStringListAndFile) {
  std::string dir = testing::MakeTempDir();
  EXPECT_EQ(LoadChatTemplate(dir).status().code(), absl::StatusCode::kNotFound);
  WriteFile(dir + "/chat_template.jinja", "from file");
  EXPECT_EQ(*LoadChatTemplate(dir), "from file");
  WriteFile(dir + "/tokenizer_config.json",
            R"({"chat_template": [{"name": "default", "template": "A"},
                                  {"name": "tool_use", "template": "B"}]})");
  EXPECT_EQ(*LoadChatTemplate(dir), "A");
  EXPECT_EQ(*LoadChatTemplate(dir, "tool_use"), "B");
  absl::StatusOr<std::string> missing = LoadChatTemplate(dir, "rag");
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "tool_use"));
  WriteFile(dir + "/tokenizer_config.json", R"({"chat_template": "S"})");
  EXPECT_EQ(*LoadChatTemplate(dir), "S");
}

TEST(LoadChatTemplateTest, RealTokenizers) {
  QUANT_REQUIRE_SHARED(testing::SharedPath("tokenizers/qwen3"));
  absl::StatusOr<std::string> qwen =
      LoadChatTemplate(testing::SharedPath("tokenizers/qwen3"));
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_TRUE(absl::StrContains(*qwen, "<|im_start|>"));
  ASSERT_TRUE(LoadChatTemplate(testing::SharedPath("tokenizers/llama3")).ok());
}

std::string ValidationError(const std::string& conversation) {
  return std::string(
      ValidateConversation(ordered_json::parse(conversation)).message());
}

TEST(ChatTemplateTest, BadConversationsNameIndexAndField) {
  EXPECT_TRUE(ValidateConversation(
                  ordered_json::parse(
                      R"({"messages": [{"role": "user", "content": "hi"}]})"))
                  .ok());
  EXPECT_EQ(ValidationError(R"({"msgs": []})"),
            "conversation: \"messages\" must be an array");
  EXPECT_EQ(ValidationError(R"({"messages": [{"role": "user", "content": "a"},
                                           {"role": "robot", "content": "b"}]})"),
            "conversation: messages[1].role: 'robot' is not one of system, "
            "user, assistant, tool");
  EXPECT_EQ(ValidationError(R"({"messages": [{"content": "b"}]})"),
            "conversation: messages[0].role: must be a string");
  EXPECT_EQ(
      ValidationError(R"({"messages": [{"role": "user", "content": 5}]})"),
      "conversation: messages[0].content: must be a string, got number");
  EXPECT_EQ(ValidationError(R"({"messages": [{"role": "assistant"}]})"),
            "conversation: messages[0].content: missing (allowed only with "
            "tool_calls)");
  EXPECT_EQ(ValidationError(R"({"messages": [{"role": "assistant",
      "content": null, "tool_calls": [1]}]})"),
            "conversation: messages[0].tool_calls[0]: must be an object");
  EXPECT_EQ(ValidationError(R"({"messages": ["hi"]})"),
            "conversation: messages[0]: must be an object, got string");
  EXPECT_TRUE(ValidateConversation(
                  ordered_json::parse(R"({"messages": [{"role": "assistant",
      "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]})"))
                  .ok());
}

TEST(ChatTemplateTest, ContextFollowsApplyChatTemplate) {
  ChatRenderOptions options;
  options.add_generation_prompt = true;
  options.system_prompt = "Be brief.";
  options.extra_context = ordered_json::parse(R"({"enable_thinking": false})");
  nlohmann::json config = nlohmann::json::parse(
      R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
          "unk_token": null, "pad_token": ""})");
  absl::StatusOr<ordered_json> context = BuildChatContext(
      ordered_json::parse(
          R"({"messages": [{"role": "user", "content": "q"}]})"),
      config, options);
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ((*context)["messages"].size(), 2u);
  EXPECT_EQ((*context)["messages"][0]["role"], "system");
  EXPECT_EQ((*context)["messages"][0]["content"], "Be brief.");
  EXPECT_EQ((*context)["add_generation_prompt"], true);
  EXPECT_TRUE((*context)["tools"].is_null());
  EXPECT_EQ((*context)["bos_token"], "<s>");
  EXPECT_EQ((*context)["eos_token"], "</s>");
  EXPECT_FALSE(context->contains("unk_token"));
  EXPECT_FALSE(context->contains("pad_token"));
  EXPECT_EQ((*context)["enable_thinking"], false);
  // A conversation with a system message keeps it and gets no second one.
  context = BuildChatContext(
      ordered_json::parse(R"({"messages": [{"role": "system", "content": "s"},
                                           {"role": "user", "content": "q"}],
                              "tools": [{"type": "function"}]})"),
      config, options);
  ASSERT_TRUE(context.ok());
  EXPECT_EQ((*context)["messages"].size(), 2u);
  EXPECT_EQ((*context)["tools"].size(), 1u);
}

TEST(ChatTemplateTest, RendersRealQwen3AndLlama3) {
  for (const char* name : {"qwen3", "llama3"}) {
    std::string dir = testing::SharedPath(std::string("tokenizers/") + name);
    QUANT_REQUIRE_SHARED(dir);
    absl::StatusOr<std::string> source = LoadChatTemplate(dir);
    ASSERT_TRUE(source.ok()) << source.status();
    absl::StatusOr<Template> t = Template::Parse(*source);
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<std::string> config_text =
        ReadFileToString(dir + "/tokenizer_config.json");
    ASSERT_TRUE(config_text.ok());
    nlohmann::json config = nlohmann::json::parse(*config_text);
    ChatRenderOptions options;
    options.add_generation_prompt = true;
    absl::StatusOr<std::string> out =
        RenderChat(*t,
                   nlohmann::json::parse(
                       R"({"messages": [{"role": "user", "content": "Hi"}]})"),
                   config, options);
    ASSERT_TRUE(out.ok()) << out.status();
    if (std::string(name) == "qwen3") {
      EXPECT_EQ(*out,
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    } else {
      EXPECT_EQ(
          *out,
          "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
          "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    }
    // A bad conversation never reaches the template.
    out =
        RenderChat(*t, nlohmann::json::parse(R"({"messages": [{"role": 1}]})"),
                   config, options);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace quant
