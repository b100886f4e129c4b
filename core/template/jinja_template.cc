// Public API of the Jinja engine; see jinja_template.h.
#include "core/template/jinja_template.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"
#include "core/template/jinja_error.h"
#include "core/template/jinja_lexer.h"
#include "core/template/jinja_parser.h"

namespace quant::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  // The engine decodes code points assuming valid UTF-8 (the reference
  // works on JavaScript strings, which cannot hold broken sequences).
  if (!IsValidUtf8(absl::string_view(source.data(), source.size()))) {
    return absl::InvalidArgumentError(
        "chat template: the template is not valid UTF-8");
  }
  absl::StatusOr<std::vector<Token>> tokens =
      Tokenize(absl::string_view(source.data(), source.size()));
  if (!tokens.ok()) return FinishError(tokens.status());
  absl::StatusOr<std::vector<NodePtr>> program = jinja::Parse(*tokens);
  if (!program.ok()) return FinishError(program.status());
  Template t;
  t.program_ =
      std::make_shared<const std::vector<NodePtr>>(std::move(*program));
  return t;
}

absl::StatusOr<std::string> Template::Render(
    const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object() && !context.is_null()) {
    return absl::InvalidArgumentError(
        "chat template: the render context must be a JSON object");
  }
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    std::time_t t =
        std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &now);
  }
  Interpreter interpreter(options.limits, now);
  auto globals = std::make_shared<Scope>();
  interpreter.InstallGlobals(globals.get());
  if (context.is_object()) {
    for (const auto& [key, value] : context.items()) {
      if (globals->HasOwn(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("chat template: context variable '", key,
                         "' would replace a built-in"));
      }
      globals->Set(key, Value::FromJson(value));
    }
  }
  absl::StatusOr<std::string> out = interpreter.Run(*program_, globals);
  if (!out.ok()) return FinishError(out.status());
  return out;
}

absl::StatusOr<std::string> Template::Render(
    const nlohmann::json& context, const RenderOptions& options) const {
  return Render(nlohmann::ordered_json(context), options);
}

}  // namespace quant::jinja
