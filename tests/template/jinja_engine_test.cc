// Unit tests of the Jinja engine: the lexer's preprocessing and token
// positions, parse errors with line:column, evaluation of expressions,
// statements, filters, tests and methods (expected outputs taken from the
// reference @huggingface/jinja 0.5.13), and the error paths: unknown
// filter/test/method, unclosed blocks, raise_exception, and the recursion
// depth and output size limits.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "core/template/jinja_builtins.h"
#include "core/template/jinja_lexer.h"
#include "core/template/jinja_template.h"
#include "core/template/jinja_value.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace quant::jinja {
namespace {

absl::StatusOr<std::string> RenderText(const std::string& source,
                                       const std::string& context_json = "{}",
                                       const RenderOptions& options = {}) {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return t.status();
  return t->Render(nlohmann::ordered_json::parse(context_json), options);
}

struct EvalCase {
  const char* source;
  const char* context;
  const char* expected;
};

// Outputs of @huggingface/jinja 0.5.13 for these templates and contexts.
const EvalCase kReferenceCases[] = {
    {R"__({{ 1.0 }}|{{ 1 }}|{{ 1.5 }}|{{ 10 / 4 }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ -3 | abs }})__",
     R"__({})__", R"__(1.0|1|1.5|2.5|3|1|1024|3)__"},
    {R"__({{ true }}|{{ none }}|{{ undefined_var }}|{{ [1, 'a', none] }}|{{ {'k': 1.5} }})__",
     R"__({})__", R"__(true|||[1, "a", null]|{"k": 1.5})__"},
    {R"__({{ 'abc'[::-1] }}|{{ [1,2,3,4][1:3] }}|{{ [1,2,3][-1] }}|{{ 'hello'[1:] }}|{{ [1,2,3,4,5][::2] }})__",
     R"__({})__", R"__(cba|[2, 3]|3|ello|[1, 3, 5])__"},
    {R"__({% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ x }};{% endfor %})__",
     R"__({"items": ["a", "b"]})__", R"__(10truefalse22a;21falsetrue21b;)__"},
    {R"__({% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1,2,3,4] if x is even %}{{ x }}{% endfor %})__",
     R"__({"d": {"b": 1, "a": 2}})__", R"__(b=1,a=2,|empty|24)__"},
    {R"__({% set ns = namespace(n=0) %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }})__",
     R"__({})__", R"__(6)__"},
    {R"__({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }})__",
     R"__({})__", R"__(Hi Bob! Hi Al?)__"},
    {R"__({{ x | tojson }}|{{ x | tojson(indent=2) }})__",
     R"__({"x": {"a": [1, 2.5, "\u00e9\n\"q\""], "b": null, "c": true, "d": {}}})__",
     R"__({"a": [1, 2.5, "é\n\"q\""], "b": null, "c": true, "d": {}}|{
  "a": [
    1,
    2.5,
    "é\n\"q\""
  ],
  "b": null,
  "c": true,
  "d": {}
})__"},
    {R"__({{ '  a b  ' | trim }}|{{ 'Hello World' | lower }}|{{ 'hello world' | title }}|{{ 'hello' | capitalize }}|{{ 'abc' | upper }}|{{ 'a-b-c' | replace('-', '+') }}|{{ ['x','y'] | join(', ') }}|{{ 'abc' | length }})__",
     R"__({})__", R"__(a b|hello world|Hello World|Hello|ABC|a+b+c|x, y|3)__"},
    {R"__({{ ' a b '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x','c')) }})__",
     R"__({})__",
     R"__(["a", "b"]|["a", "b", "", "c"]|["a", "b,c"]|true|true)__"},
    {R"__({{ items | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('/') }}|{{ items | rejectattr('role', 'equalto', 'user') | list | length }}|{{ items | first }}|{{ (items | last).content }})__",
     R"__({"items": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})__",
     R"__(a/c|1|{"role": "user", "content": "a"}|c)__"},
    {R"__({{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ 1 is integer }}{{ {} is mapping }}{{ [] is iterable }}{{ 3 is odd }}{{ true is boolean }})__",
     R"__({"x": 1})__", R"__(truetruetruetruetruetruetruetruetruetrue)__"},
    {R"__({{ 'a' ~ 1 ~ none_var }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}|{{ 'b' in 'abc' }}|{{ 2 in [1,2] }}|{{ 'k' in {'k': 1} }}|{{ 3 not in [1] }}|{{ 1 == 1.0 }}|{{ 'x' if false else 'y' }})__",
     R"__({})__", R"__(a1|ab|[1, 2]|true|true|true|true|true|y)__"},
    {R"__({%- if true -%}
  yes  
{%- endif -%}
|{# c #}  {{- 'x' -}}  |
  {% if true %}
    a
  {% endif %}
end)__",
     R"__({})__",
     R"__(yes|x|
    a
end)__"},
    {R"__({% set x %}block {{ 1 }}{% endset %}{{ x }}|{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}|{% for i in range(5) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}|{{ range(1, 7, 2) }})__",
     R"__({})__", R"__(block 1|02|01|[1, 3, 5])__"},
    {R"__({{ d.get('a') }}|{{ d.get('z', 'dflt') }}|{{ d | length }}|{{ d.keys() }}|{{ d.values() }}|{{ missing | default('def') }}|{{ 'x\ty' }}|{{ "q\"" }})__",
     R"__({"d": {"a": 1, "b": 2}})__",
     R"__(1|dflt|2|["a", "b"]|[1, 2]|def|x	y|q")__"},
    {R"__({{ '3' | int + 1 }}|{{ '2.5' | float }}|{{ 3 | float }}|{{ 3.7 | int }}|{{ 5 | string }}|{{ [3,1,2] | sort }}|{{ [1,1,2] | unique }}|{{ [1,2] | reverse }})__",
     R"__({})__", R"__(4|2.5|3.0|3|5|[1, 2, 3]|[1, 2]|[2, 1])__"},
    {R"__({{ 'line1\nline2\n\nline4' | indent(2) }}|{{ 'a\nb' | indent(2, true) }})__",
     R"__({})__",
     R"__(line1
  line2

  line4|  a
  b)__"},
};

TEST(JinjaEngineTest, MatchesReferenceOutputs) {
  for (const EvalCase& c : kReferenceCases) {
    absl::StatusOr<std::string> out = RenderText(c.source, c.context);
    ASSERT_TRUE(out.ok()) << c.source << ": " << out.status();
    EXPECT_EQ(*out, c.expected) << c.source;
  }
}

TEST(JinjaLexerTest, PreprocessAppliesTrimAndLstripBlocks) {
  // One trailing newline goes; `%}\n` loses its newline; indentation before
  // `{%` goes; indentation before `{{` stays.
  EXPECT_EQ(PreprocessTemplate("  {% if x %}\n  {{ y }}\n{% endif %}\n"),
            "{% if x %}  {{ y }}\n{% endif %}");
  EXPECT_EQ(PreprocessTemplate("a {# c #}\nb"), "a {# c #}b");
  EXPECT_EQ(PreprocessTemplate("x{% generation %}y{% endgeneration %}z"),
            "xyz");
}

TEST(JinjaLexerTest, TokensCarryLineAndColumn) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("ab\n{{ x | f(-1) }}");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_GE(tokens->size(), 5u);
  EXPECT_EQ((*tokens)[0].type, TokenType::kText);
  EXPECT_EQ((*tokens)[1].type, TokenType::kOpenExpression);
  EXPECT_EQ((*tokens)[1].pos.line, 2);
  EXPECT_EQ((*tokens)[1].pos.column, 1);
  EXPECT_EQ((*tokens)[2].value, "x");
  EXPECT_EQ((*tokens)[2].pos.column, 4);
  // A sign after '(' is part of the number.
  EXPECT_EQ((*tokens)[6].type, TokenType::kNumericLiteral);
  EXPECT_EQ((*tokens)[6].value, "-1");
}

TEST(JinjaLexerTest, StringEscapes) {
  EXPECT_EQ(*RenderText(R"({{ 'a\nb\t\'c\'\\' }}{{ "\u00e9\x41" }})"),
            "a\nb\t'c'\\\xC3\xA9"
            "A");
  absl::StatusOr<std::string> bad = RenderText(R"({{ 'a\q' }})");
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "1:"));
}

TEST(JinjaParserTest, UnclosedBlockNamesItsOpeningTag) {
  absl::StatusOr<Template> t = Template::Parse("x\n  {% if a %}\nyes");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "chat template 2:"))
      << t.status();
  EXPECT_TRUE(absl::StrContains(t.status().message(), "endif")) << t.status();
  t = Template::Parse("{% for x in y %}{{ x }}");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "endfor"));
  t = Template::Parse("{{ 'unterminated }}");
  EXPECT_FALSE(t.ok());
  t = Template::Parse("{# no end");
  EXPECT_FALSE(t.ok());
}

TEST(JinjaParserTest, UnsupportedStatementIsAnError) {
  absl::StatusOr<Template> t = Template::Parse("a\n{% include 'x' %}");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(),
                                "chat template 2:4: unknown or unsupported "
                                "statement 'include'"))
      << t.status();
}

TEST(JinjaEvalTest, UnknownFilterNamesLineAndColumn) {
  absl::StatusOr<std::string> out =
      RenderText("line one\nline two\n{{ 'x' | upper | foo }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "chat template 3:18: unknown filter 'foo'");
}

TEST(JinjaEvalTest, UnknownTestAndMethod) {
  absl::StatusOr<std::string> out = RenderText("{{ 1 is prime }}");
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::StrContains(out.status().message(), "unknown test 'prime'"))
      << out.status();
  out = RenderText("{{ 'abc'.frobnicate() }}");
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::StrContains(out.status().message(),
                                "1:9: unknown method 'frobnicate'"))
      << out.status();
}

TEST(JinjaEvalTest, RaiseExceptionCarriesTheMessage) {
  absl::StatusOr<std::string> out = RenderText(
      "ok{% if true %}{{ raise_exception('Roles must alternate') "
      "}}{% endif %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(out.status().message(), "Roles must alternate"));
  EXPECT_TRUE(absl::StrContains(out.status().message(), "raise_exception"));
}

TEST(JinjaEvalTest, RecursionDepthLimit) {
  absl::StatusOr<std::string> out =
      RenderText("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(out.status().message(), "recursion depth"))
      << out.status();
}

TEST(JinjaEvalTest, OutputSizeLimit) {
  RenderOptions options;
  options.limits.max_output_bytes = 1000;
  absl::StatusOr<std::string> out = RenderText(
      "{% for i in range(100) %}0123456789abcdef{% endfor %}", "{}", options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(out.status().message(), "output size limit"));
  // Doubling a string runs into the limit too.
  out = RenderText(
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
      "{}", options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(JinjaEvalTest, StripWithCharsFollowsPython) {
  // The reference ignores the argument; Python strips only those characters.
  EXPECT_EQ(*RenderText("{{ 'xxhixx'.strip('x') }}|{{ '\\n a\\n'.strip('\\n') "
                        "}}|{{ '--a'.lstrip('-') }}|{{ 'a--'.rstrip('-') }}"),
            "hi| a|a|a");
}

TEST(JinjaEvalTest, StrftimeNowUsesTheInjectedTime) {
  RenderOptions options;
  std::tm now{};
  now.tm_year = 2025 - 1900;
  now.tm_mon = 2;
  now.tm_mday = 4;
  now.tm_hour = 7;
  now.tm_min = 5;
  options.now = now;
  EXPECT_EQ(*RenderText("{{ strftime_now('%Y-%m-%d %H:%M %b %B %% %j') }}",
                        "{}", options),
            "2025-03-04 07:05 Mar March % %j");
}

TEST(JinjaEvalTest, ContextMemberOrderIsKept) {
  EXPECT_EQ(*RenderText("{{ x | tojson }}", R"({"x": {"z": 1, "a": 2}})"),
            R"({"z": 1, "a": 2})");
  // Integral floats in the context are ints, as in JavaScript.
  EXPECT_EQ(*RenderText("{{ x }} {{ y }}", R"({"x": 2.0, "y": 0.5})"), "2 0.5");
}

TEST(JinjaEvalTest, JsNumberFormatting) {
  EXPECT_EQ(JsNumberToString(1e21), "1e+21");
  EXPECT_EQ(JsNumberToString(1.5e-7), "1.5e-7");
  EXPECT_EQ(JsNumberToString(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(JsNumberToString(123456789012.0), "123456789012");
  EXPECT_EQ(JsonQuote("a\x01\xC3\xA9", false), "\"a\\u0001\xC3\xA9\"");
  EXPECT_EQ(JsonQuote("\xC3\xA9\xF0\x9F\x98\x80", true),
            "\"\\u00e9\\ud83d\\ude00\"");
}

TEST(JinjaEvalTest, StepLimit) {
  // Nested loops that print nothing stay under the size limit; the step
  // count still ends them.
  RenderOptions options;
  options.limits.max_steps = 10000;
  absl::StatusOr<std::string> out = RenderText(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}"
      "{% endfor %}",
      "{}", options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(out.status().message(),
            "chat template 1:27: step limit (10000) exceeded");
  // A range too large for the size limit fails before it is built.
  out = RenderText("{% for i in range(999999999) %}{% endfor %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(JinjaEvalTest, BreakAndContinueAsBlockResults) {
  // An iteration cut short drops its output, as in the reference; break
  // and continue reach their loop through if and set blocks.
  EXPECT_EQ(*RenderText("{% for i in range(4) %}<{{ i }}{% if i == 1 %}"
                        "{% continue %}{% endif %}{% set x %}{% if i == 2 %}"
                        "{% break %}{% endif %}{% endset %}>{% endfor %}"),
            "<0>");
  absl::StatusOr<std::string> out = RenderText("a\n  {% continue %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "chat template 2:3: 'continue' outside a loop");
  // A macro body is not inside the caller's loop.
  out = RenderText(
      "{% macro m() %}{% break %}{% endmacro %}{% for i in [1] %}{{ m() }}"
      "{% endfor %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "chat template 1:16: 'break' outside a loop");
}

TEST(JinjaEvalTest, FuzzFindings) {
  // Found by tests/fuzz/template_fuzzer: a truncated UTF-8 sequence was
  // decoded past the end of the text.
  EXPECT_EQ(Template::Parse("a\xE2 {%- if 1 %}{% endif %}").status().message(),
            "chat template: the template is not valid UTF-8");
  // A namespace that holds itself prints as nested JSON up to a limit and
  // is freed when rendering ends.
  absl::StatusOr<std::string> out =
      RenderText("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

// Left-associative chains are parsed in a loop but nest their tree one
// level per link; a long one is refused at parse time (as deep brackets
// are) instead of overflowing the stack when it is evaluated or freed.
TEST(JinjaEvalTest, LongChainsAreRefusedByDepth) {
  std::string plus, dots, pipes, ors, compares;
  for (int i = 0; i < 20000; ++i) {
    plus += "a + ";
    dots += ".b";
    pipes += " | trim";
    ors += "a or ";
    compares += "a < ";
  }
  for (const std::string& expression :
       {plus + "a", "a" + dots, "'x'" + pipes, ors + "a", compares + "a"}) {
    absl::StatusOr<Template> parsed =
        Template::Parse("{{ " + expression + " }}");
    ASSERT_FALSE(parsed.ok()) << expression.substr(0, 40);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "nesting deeper"))
        << parsed.status();
  }
  // Real templates' chains are short: 100 links still render.
  std::string hundred = "'x'";
  for (int i = 0; i < 100; ++i) hundred += " ~ 'x'";
  absl::StatusOr<std::string> out = RenderText("{{ " + hundred + " }}");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::string(101, 'x'));
}

TEST(JinjaEvalTest, BreakOutsideLoopAndBadSet) {
  EXPECT_FALSE(RenderText("{% break %}").ok());
  absl::StatusOr<std::string> out =
      RenderText("{% set d = {} %}{% set d.x = 1 %}");
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::StrContains(out.status().message(), "namespace"));
}

TEST(JinjaEvalTest, CallBlockAndCaller) {
  EXPECT_EQ(*RenderText("{% macro wrap() %}[{{ caller() }}]{% endmacro %}"
                        "{% call wrap() %}inner{% endcall %}"),
            "[inner]");
}

}  // namespace
}  // namespace quant::jinja
