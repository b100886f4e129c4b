// Tokenizer of the Jinja engine. It first preprocesses the source the way
// Hugging Face chat templates are rendered (and as @huggingface/jinja's
// Template does): a single trailing newline is dropped, lstrip_blocks
// (spaces/tabs before `{%`, `{#`, `{-` at a line start are removed) and
// trim_blocks (the newline right after `%}`, `#}`, `-}` is removed), and
// `{% generation %}` / `{% endgeneration %}` markers are deleted. Then it
// splits text from `{{ }}`, `{% %}` and `{# #}` tags, honouring the `-`
// whitespace-control markers. Every token keeps its line:column in the
// original source.
#ifndef QUANT_CORE_TEMPLATE_JINJA_LEXER_H_
#define QUANT_CORE_TEMPLATE_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/template/jinja_value.h"

namespace quant::jinja {

enum class TokenType {
  kText,
  kNumericLiteral,
  kStringLiteral,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenSquareBracket,
  kCloseSquareBracket,
  kOpenCurlyBracket,
  kCloseCurlyBracket,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditiveOperator,        // + - ~
  kMultiplicativeOperator,  // * / // %
  kExponentiationOperator,  // **
  kComparisonOperator,      // < > <= >= == !=
  kUnaryOperator,           // a lone + or - before an operand
  kComment,
};

const char* TokenTypeName(TokenType type);

struct Token {
  TokenType type;
  std::string value;
  SourcePos pos;
};

// The preprocessing step alone (exposed for tests).
std::string PreprocessTemplate(absl::string_view source);

// Tokens of `source`; errors name the line and column.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source);

// True for the characters JavaScript's String.prototype.trim removes.
bool IsJsWhitespace(char32_t c);

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_LEXER_H_
