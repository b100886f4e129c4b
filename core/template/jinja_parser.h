// Parser of the Jinja engine: tokens (jinja_lexer.h) to a syntax tree
// (jinja_ast.h). The grammar and operator precedence follow
// @huggingface/jinja: `if`-expressions, or, and, not, comparisons and
// `in`, + - ~, * / // %, **, `is` tests, `|` filters, unary signs, then
// calls, member access, subscripts and slices.
#ifndef QUANT_CORE_TEMPLATE_JINJA_PARSER_H_
#define QUANT_CORE_TEMPLATE_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/template/jinja_ast.h"
#include "core/template/jinja_lexer.h"

namespace quant::jinja {

// Nesting deeper than this (brackets, blocks) is refused, so that a
// hostile template cannot exhaust the stack.
inline constexpr int kMaxParseDepth = 256;

// The statements of the whole template. Errors name the line and column.
absl::StatusOr<std::vector<NodePtr>> Parse(const std::vector<Token>& tokens);

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_PARSER_H_
