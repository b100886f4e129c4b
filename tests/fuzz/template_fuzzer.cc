// libFuzzer target: arbitrary bytes as a Jinja chat template. Parsing
// either succeeds or returns an error; a parsed template is rendered with a
// small fixed chat context under tight limits, so that any loop, recursion
// or blow-up ends with a ResourceExhausted error quickly instead of hanging
// the fuzzer. Any other outcome than a value or an error is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "absl/status/status.h"
#include "core/template/jinja_template.h"
#include "nlohmann/json.hpp"

namespace {

const nlohmann::ordered_json& ChatContext() {
  static const nlohmann::ordered_json* context = [] {
    auto* c = new nlohmann::ordered_json;
    (*c)["messages"] = nlohmann::ordered_json::array(
        {{{"role", "system"}, {"content", "Be brief."}},
         {{"role", "user"}, {"content", "Hi there"}},
         {{"role", "assistant"}, {"content", "Hello!"}},
         {{"role", "user"}, {"content", "2+2?"}}});
    (*c)["add_generation_prompt"] = true;
    (*c)["bos_token"] = "<s>";
    (*c)["eos_token"] = "</s>";
    (*c)["tools"] = nullptr;
    return c;
  }();
  return *context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto parsed = quant::Template::Parse(source);
  if (!parsed.ok()) return 0;
  quant::jinja::RenderOptions options;
  options.limits.max_depth = 64;
  options.limits.max_output_bytes = 64 << 10;
  options.limits.max_steps = 20000;
  options.now = std::tm{};
  auto out = parsed->Render(ChatContext(), options);
  if (out.ok() && out->size() > options.limits.max_output_bytes) std::abort();
  if (!out.ok() && out.status().code() != absl::StatusCode::kInvalidArgument &&
      out.status().code() != absl::StatusCode::kResourceExhausted) {
    std::abort();
  }
  return 0;
}
