// Every fixture template (tests/fixtures/template/templates.json) rendered
// with every conversation in conversations.json, add_generation_prompt
// false and true, against reference.json: the output of the JavaScript
// reference @huggingface/jinja (gen_reference.mjs), byte for byte. Where
// the reference threw, RenderChat must fail too, and for raise_exception()
// carry the template's message.
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "core/base/file_util.h"
#include "core/template/chat_template.h"
#include "core/template/jinja_template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

using nlohmann::ordered_json;

std::string FixtureDir() {
  const char* env = std::getenv("QUANT_FIXTURES_DIR");
  if (env != nullptr) return std::string(env) + "/template";
  return QUANT_TEMPLATE_FIXTURES_DIR;
}

ordered_json ReadJson(const std::string& name) {
  auto text = ReadFileToString(FixtureDir() + "/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return ordered_json::parse(text.ok() ? *text : "{}");
}

// templates.json's fixed_now, "YYYY-MM-DDTHH:MM:SS".
std::tm FixedNow(const std::string& iso) {
  std::tm tm{};
  tm.tm_year = std::stoi(iso.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(iso.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(iso.substr(8, 2));
  tm.tm_hour = std::stoi(iso.substr(11, 2));
  tm.tm_min = std::stoi(iso.substr(14, 2));
  tm.tm_sec = std::stoi(iso.substr(17, 2));
  return tm;
}

TEST(TemplateReferenceTest, EveryCaseMatchesTheReference) {
  ordered_json templates = ReadJson("templates.json");
  ordered_json conversations = ReadJson("conversations.json");
  ordered_json reference = ReadJson("reference.json");
  ASSERT_TRUE(templates.contains("templates"));
  std::map<std::string, ordered_json> template_by_name;
  for (const auto& t : templates["templates"]) {
    template_by_name[t["name"].get<std::string>()] = t;
  }
  std::map<std::string, ordered_json> conversation_by_name;
  for (const auto& c : conversations["conversations"]) {
    conversation_by_name[c["name"].get<std::string>()] = c;
  }
  std::tm now = FixedNow(templates["fixed_now"].get<std::string>());
  std::map<std::string, Template> parsed;
  int matched = 0, errors_matched = 0;
  ASSERT_GE(reference["cases"].size(), 300u);
  for (const auto& c : reference["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const ordered_json& t = template_by_name.at(name);
    const std::string file = t["file"].get<std::string>();
    if (parsed.count(file) == 0) {
      auto source = ReadFileToString(FixtureDir() + "/" + file);
      ASSERT_TRUE(source.ok()) << source.status();
      auto tmpl = Template::Parse(*source);
      ASSERT_TRUE(tmpl.ok()) << file << ": " << tmpl.status();
      parsed.emplace(file, *tmpl);
    }
    const ordered_json& conversation =
        conversation_by_name.at(c["conversation"].get<std::string>());
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (t.contains("extra_context")) options.extra_context = t["extra_context"];
    options.render.now = now;
    nlohmann::json tokenizer_config =
        nlohmann::json::parse(t["tokenizer_config"].dump());
    auto out =
        RenderChat(parsed.at(file), conversation, tokenizer_config, options);
    const std::string label =
        name + " / " + c["conversation"].get<std::string>() +
        " / add_generation_prompt=" +
        (options.add_generation_prompt ? "true" : "false");
    if (c.contains("output")) {
      ASSERT_TRUE(out.ok()) << label << ": " << out.status();
      EXPECT_EQ(*out, c["output"].get<std::string>()) << label;
      if (out.ok() && *out == c["output"].get<std::string>()) ++matched;
    } else {
      const std::string error = c["error"].get<std::string>();
      EXPECT_FALSE(out.ok()) << label << ": the reference failed with '"
                             << error << "', we rendered\n"
                             << (out.ok() ? *out : "");
      if (!out.ok()) {
        ++errors_matched;
        if (absl::StrContains(out.status().message(), "raise_exception")) {
          EXPECT_TRUE(absl::StrContains(out.status().message(), error))
              << label << ": " << out.status() << " vs " << error;
        }
      }
    }
  }
  std::cout << "reference cases: " << matched << " outputs and "
            << errors_matched << " errors match\n";
}

}  // namespace
}  // namespace quant
