// Built-in filters, tests, value methods and global functions of the Jinja
// engine, with the semantics of @huggingface/jinja (which emulates Python
// Jinja2 in JavaScript); where they differ from Python Jinja2 the
// reference's behaviour is kept, except that str.strip/lstrip/rstrip honour
// a `chars` argument as Python does (the reference ignores it).
#ifndef QUANT_CORE_TEMPLATE_JINJA_BUILTINS_H_
#define QUANT_CORE_TEMPLATE_JINJA_BUILTINS_H_

#include <ctime>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/template/jinja_value.h"

namespace quant::jinja {

// Applies filter `name` to `operand`. Errors ("unknown filter 'x'", or the
// filter's own) are unplaced (jinja_error.h); the caller adds the position.
absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& operand,
                                  CallArgs& args);

// True when `name` is a known test.
bool IsKnownTest(const std::string& name);
// Runs test `name` on `operand` (and `argument` for equalto/eq/...).
// Errors are unplaced, as for ApplyFilter.
absl::StatusOr<bool> RunTest(const std::string& name, const Value& operand,
                             const Value& argument);

// `object.name` / `object[name]`: a dict member, or a method or property
// of the value's type (str.upper, dict.items, list.length, ...); undefined
// when there is none.
Value GetAttribute(const Value& object, const std::string& name);

// Python/JavaScript-style string helpers (exposed for tests). Lengths and
// indices count Unicode code points (the reference counts UTF-16 units;
// the two agree outside the astral planes).
size_t CodePointLength(absl::string_view s);
std::string JsToUpper(absl::string_view s);
std::string JsToLower(absl::string_view s);
std::string JsTrim(absl::string_view s, bool left, bool right);

// The reference's strftime: %Y %m %d %b %B %H %M %% (English month names);
// other directives are kept as written.
std::string Strftime(const std::tm& time, absl::string_view format);

// JavaScript String(value) of a runtime value (what `~` and join use).
// Fails only for a list holding a function (see ToDisplayString).
absl::StatusOr<std::string> RawString(const Value& value);

// Compares two values as the reference's sort and dictsort do: <0, 0, >0,
// or an unplaced error for values of kinds that do not compare.
absl::StatusOr<int> CompareValues(const Value& a, const Value& b,
                                  bool case_sensitive);

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_BUILTINS_H_
