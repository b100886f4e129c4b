// Public API of the Jinja engine (core/template): parse a template once,
// render it with a JSON context. Covers the subset of Jinja2 that Hugging
// Face chat templates use, with the semantics of the JavaScript reference
// @huggingface/jinja (see tests/fixtures/template/README.md). Sources are
// preprocessed with trim_blocks and lstrip_blocks on, as transformers and
// the reference do for chat templates.
//
//   QUANT_ASSIGN_OR_RETURN(Template t, Template::Parse(source));
//   QUANT_ASSIGN_OR_RETURN(std::string text, t.Render(context));
//
// Errors are InvalidArgument ("chat template L:C: message"; for
// raise_exception("msg"): "chat template L:C: raise_exception: msg") or
// ResourceExhausted for the recursion depth, output size and step limits.
#ifndef QUANT_CORE_TEMPLATE_JINJA_TEMPLATE_H_
#define QUANT_CORE_TEMPLATE_JINJA_TEMPLATE_H_

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/template/jinja_ast.h"
#include "core/template/jinja_interpreter.h"
#include "nlohmann/json.hpp"

namespace quant::jinja {

struct RenderOptions {
  RenderLimits limits;
  // What strftime_now() sees; unset = the current local time.
  std::optional<std::tm> now;
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Each top-level member of `context` becomes a variable. Object member
  // order is kept (it shows in tojson); a nlohmann::json context has its
  // members sorted by key, so pass an ordered_json where order matters.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const RenderOptions& options = {}) const;
  absl::StatusOr<std::string> Render(const nlohmann::json& context,
                                     const RenderOptions& options = {}) const;

 private:
  Template() = default;
  std::shared_ptr<const std::vector<NodePtr>> program_;
};

}  // namespace quant::jinja

namespace quant {
using jinja::Template;
}  // namespace quant

#endif  // QUANT_CORE_TEMPLATE_JINJA_TEMPLATE_H_
