// Conversation documents in calibration sets: the renderer a recipe's
// chat_template choice gives, and the tokens the split takes from them.
#include "core/calib/chat_rendering.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/calib/calibration_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

constexpr char kTemplate[] =
    "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

class ChatRenderingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stories_ = testing::SharedPath("models/stories260K/hf-f32");
    QUANT_REQUIRE_SHARED(stories_);
    temp_ = testing::MakeTempDir();
    template_path_ = temp_ + "/chat.jinja";
    ASSERT_TRUE(WriteFileAtomically(template_path_, kTemplate).ok());
  }

  std::unique_ptr<ChatRenderer> Load(const ChatTemplateChoice& choice,
                                     const std::string& dir = "") {
    auto renderer = ChatRenderer::Load(dir.empty() ? stories_ : dir, choice);
    EXPECT_TRUE(renderer.ok()) << renderer.status();
    return renderer.ok() ? *std::move(renderer) : nullptr;
  }

  std::string stories_;
  std::string temp_;
  std::string template_path_;
};

TEST_F(ChatRenderingTest, ChoicesGiveTheirRenderer) {
  ChatTemplateChoice choice;
  choice.chat_template = "none";
  EXPECT_EQ(Load(choice), nullptr);
  choice.chat_template = "auto";  // stories260K has no template.
  EXPECT_EQ(Load(choice), nullptr);

  const std::string qwen3 = testing::SharedPath("tokenizers/qwen3");
  QUANT_REQUIRE_SHARED(qwen3);
  std::unique_ptr<ChatRenderer> own = Load(choice, qwen3);
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->origin().source, "tokenizer_config.json");
  EXPECT_EQ(own->origin().sha256.size(), 64u);

  for (const std::string& named :
       {template_path_, absl::StrCat("file://", template_path_)}) {
    choice.chat_template = named;
    std::unique_ptr<ChatRenderer> file = Load(choice);
    ASSERT_NE(file, nullptr);
    EXPECT_EQ(file->origin().source, named);
    EXPECT_EQ(file->origin().sha256, Sha256Hex(kTemplate));
  }
}

TEST_F(ChatRenderingTest, RenderAppliesThePromptsAndTheTokenizersTokens) {
  ChatTemplateChoice choice;
  choice.chat_template = template_path_;
  choice.system_prompt = "Tell stories.";
  choice.add_generation_prompt = true;
  std::unique_ptr<ChatRenderer> renderer = Load(choice);
  ASSERT_NE(renderer, nullptr);
  absl::StatusOr<std::string> text =
      renderer->Render(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<s>system: Tell stories.\nuser: Hi\nassistant:");
  // A conversation with its own system message keeps it.
  text = renderer->Render(
      R"({"messages": [{"role": "system", "content": "Be kind."},)"
      R"( {"role": "user", "content": "Hi"}]})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<s>system: Be kind.\nuser: Hi\nassistant:");
}

TEST_F(ChatRenderingTest, ErrorsNameTheFieldOrThePlace) {
  ChatTemplateChoice choice;
  choice.chat_template = temp_ + "/missing.jinja";
  auto missing = ChatRenderer::Load(stories_, choice);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("calibration.chat_template"));
  const std::string broken = temp_ + "/broken.jinja";
  ASSERT_TRUE(WriteFileAtomically(broken, "ok\n{% if %}").ok());
  choice.chat_template = broken;
  auto unparsed = ChatRenderer::Load(stories_, choice);
  ASSERT_FALSE(unparsed.ok());
  EXPECT_THAT(unparsed.status().message(), HasSubstr("2:"));
  const std::string huge = temp_ + "/huge.jinja";
  ASSERT_TRUE(
      WriteFileAtomically(huge, std::string(size_t{2} << 20, 'x')).ok());
  choice.chat_template = huge;
  EXPECT_FALSE(ChatRenderer::Load(stories_, choice).ok());

  choice.chat_template = template_path_;
  std::unique_ptr<ChatRenderer> renderer = Load(choice);
  ASSERT_NE(renderer, nullptr);
  auto bad = renderer->Render(R"({"messages": [{"role": "robot"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("messages[0].role"));
  EXPECT_FALSE(renderer->Render("{\"messages\": [").ok());
}

// The split renders conversations and encodes them as they are: no BOS of
// its own (the template wrote one), no whitespace stripped; without a
// renderer a conversation is refused by line.
TEST_F(ChatRenderingTest, SplitTakesTheRenderedTokens) {
  auto tokenizer = Tokenizer::LoadFromDirectory(stories_);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::string bytes;
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&bytes,
                    R"({"messages": [{"role": "user", "content": "Story )", i,
                    R"("}, {"role": "assistant", "content": "Once upon a )"
                    R"(time there was a cat."}]})",
                    "\n");
  }
  absl::StrAppend(&bytes, R"({"text": "A plain story about a dog."})", "\n");
  auto file = ParseCalibrationFile(bytes);
  ASSERT_TRUE(file.ok()) << file.status();

  ChatTemplateChoice choice;
  choice.chat_template = template_path_;
  std::unique_ptr<ChatRenderer> renderer = Load(choice);
  ASSERT_NE(renderer, nullptr);
  const CalibrationDocument& first = file->documents[0];
  auto ids = CalibrationDocumentTokens(first, **tokenizer, /*add_bos=*/true,
                                       renderer.get());
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto expected = (*tokenizer)
                      ->Encode(
                          "<s>user: Story 0\nassistant: Once upon a time there "
                          "was a cat.\n",
                          /*add_special_tokens=*/false);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(*ids, *expected);
  ASSERT_TRUE((*tokenizer)->bos_id().has_value());
  EXPECT_EQ(ids->front(), *(*tokenizer)->bos_id());  // One BOS, the template's.
  EXPECT_NE((*ids)[1], *(*tokenizer)->bos_id());

  CalibrationSplitOptions options;
  options.samples = 2;
  options.seq_len = 16;
  options.heldout_count = 3;
  auto refused = BuildCalibrationSplit(*file, **tokenizer, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("line "));
  EXPECT_THAT(refused.status().message(), HasSubstr("no chat template"));
  options.chat = renderer.get();
  auto split = BuildCalibrationSplit(*file, **tokenizer, options);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_GE(split->conversation_documents, 11);  // All but the text one.
  EXPECT_LE(split->conversation_documents, 12);
}

}  // namespace
}  // namespace quant
