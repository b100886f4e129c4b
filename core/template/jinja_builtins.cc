// Built-in filters, tests and methods of the Jinja engine; see
// jinja_builtins.h.
#include "core/template/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"
#include "core/template/jinja_error.h"
#include "core/template/jinja_lexer.h"
#include "utf8proc.h"

namespace quant::jinja {
namespace {

std::vector<std::string> CodePoints(absl::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    DecodeUtf8At(s, &pos);
    if (pos == start) ++pos;
    out.emplace_back(s.substr(start, pos - start));
  }
  return out;
}

std::string MapCase(absl::string_view s, bool upper) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      out.push_back(
          static_cast<char>(upper ? std::toupper(c) : std::tolower(c)));
      ++pos;
      continue;
    }
    char32_t cp = DecodeUtf8At(s, &pos);
    utf8proc_int32_t mapped =
        upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
    AppendUtf8(static_cast<char32_t>(mapped), &out);
  }
  return out;
}

bool IsAsciiWord(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

// Positional argument `i`, else keyword `name`, else null.
const Value* Arg(const CallArgs& args, size_t i, absl::string_view name) {
  if (i < args.positional.size()) return &args.positional[i];
  return args.Keyword(name);
}

absl::StatusOr<bool> BoolArg(const CallArgs& args, size_t i,
                             absl::string_view name, bool fallback) {
  const Value* v = Arg(args, i, name);
  if (v == nullptr) return fallback;
  if (!v->is_bool())
    return UnplacedError(absl::StrCat(name, " must be a boolean"));
  return v->bool_value();
}

// JavaScript parseInt(s, 10) / parseFloat(s); nullopt for NaN.
std::optional<double> JsParseNumber(const std::string& s, bool integer) {
  size_t i = 0;
  while (i < s.size()) {
    size_t p = i;
    char32_t c = DecodeUtf8At(s, &p);
    if (!IsJsWhitespace(c)) break;
    i = p;
  }
  std::string t = s.substr(i);
  if (integer) {
    size_t j = 0;
    if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
    size_t digits = j;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
    if (j == digits) return std::nullopt;
    return std::strtod(t.substr(0, j).c_str(), nullptr);
  }
  if (t.rfind("Infinity", 0) == 0 || t.rfind("+Infinity", 0) == 0)
    return HUGE_VAL;
  if (t.rfind("-Infinity", 0) == 0) return -HUGE_VAL;
  // Longest prefix that is a decimal literal (no hex, no inf/nan words).
  size_t j = 0;
  if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
  size_t mantissa = j;
  while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
  if (j < t.size() && t[j] == '.') {
    ++j;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
  }
  if (j == mantissa || (j == mantissa + 1 && t[mantissa] == '.'))
    return std::nullopt;
  if (j < t.size() && (t[j] == 'e' || t[j] == 'E')) {
    size_t k = j + 1;
    if (k < t.size() && (t[k] == '+' || t[k] == '-')) ++k;
    size_t exp_digits = k;
    while (k < t.size() && std::isdigit(static_cast<unsigned char>(t[k]))) ++k;
    if (k > exp_digits) j = k;
  }
  return std::strtod(t.substr(0, j).c_str(), nullptr);
}

Value IntFromDouble(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return Value::Float(d);
  return Value::Int(static_cast<int64_t>(d));
}

std::string ReplaceString(const std::string& s, const std::string& old_value,
                          const std::string& new_value, int64_t count) {
  if (count == 0) return s;
  int64_t remaining = count < 0 ? INT64_MAX : count;
  std::string out;
  if (old_value.empty()) {
    std::vector<std::string> chars = CodePoints(s);
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (remaining > 0) {
        out += new_value;
        --remaining;
      }
      if (i < chars.size()) out += chars[i];
    }
    return out;
  }
  size_t pos = 0;
  while (remaining > 0) {
    size_t found = s.find(old_value, pos);
    if (found == std::string::npos) break;
    out.append(s, pos, found - pos);
    out += new_value;
    pos = found + old_value.size();
    --remaining;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// Python str.strip(chars) with an explicit set of characters.
std::string StripChars(const std::string& s, const std::string& chars,
                       bool left, bool right) {
  std::vector<std::string> cps = CodePoints(s);
  std::vector<std::string> set = CodePoints(chars);
  auto in_set = [&](const std::string& c) {
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && in_set(cps[b])) ++b;
  }
  if (right) {
    while (e > b && in_set(cps[e - 1])) --e;
  }
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

Value StringMethod(const std::string& self, const std::string& name);

Value ListOfStrings(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::String(p));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> Split(const std::string& self, const CallArgs& args) {
  const Value* sep = Arg(args, 0, "sep");
  const Value* maxsplit_value = Arg(args, 1, "maxsplit");
  if (sep != nullptr && !sep->is_string() && !sep->is_none()) {
    return UnplacedError("split() separator must be a string or none");
  }
  int64_t maxsplit = -1;
  if (maxsplit_value != nullptr) {
    if (!maxsplit_value->is_int())
      return UnplacedError("split() maxsplit must be an integer");
    maxsplit = maxsplit_value->int_value();
  }
  std::vector<std::string> result;
  if (sep == nullptr || sep->is_none()) {
    std::string text = JsTrim(self, true, false);
    size_t pos = 0;
    while (pos < text.size()) {
      // Skip whitespace, then take a run of non-whitespace.
      size_t p = pos;
      char32_t c = DecodeUtf8At(text, &p);
      if (IsJsWhitespace(c)) {
        pos = p;
        continue;
      }
      if (maxsplit >= 0 && static_cast<int64_t>(result.size()) >= maxsplit) {
        result.push_back(text.substr(pos));
        break;
      }
      size_t end = pos;
      while (end < text.size()) {
        size_t q = end;
        if (IsJsWhitespace(DecodeUtf8At(text, &q))) break;
        end = q;
      }
      result.push_back(text.substr(pos, end - pos));
      pos = end;
    }
    return ListOfStrings(result);
  }
  const std::string& separator = sep->str();
  if (separator.empty()) return UnplacedError("split(): empty separator");
  size_t pos = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(result.size()) >= maxsplit) {
      result.push_back(self.substr(pos));
      break;
    }
    size_t found = self.find(separator, pos);
    if (found == std::string::npos) {
      result.push_back(self.substr(pos));
      break;
    }
    result.push_back(self.substr(pos, found - pos));
    pos = found + separator.size();
  }
  return ListOfStrings(result);
}

absl::StatusOr<bool> PrefixOrSuffix(const std::string& self,
                                    const CallArgs& args, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  if (args.positional.empty()) {
    return UnplacedError(absl::StrCat(name, "() requires an argument"));
  }
  auto check = [&](const std::string& p) {
    if (p.size() > self.size()) return false;
    return prefix ? self.compare(0, p.size(), p) == 0
                  : self.compare(self.size() - p.size(), p.size(), p) == 0;
  };
  const Value& pattern = args.positional[0];
  if (pattern.is_string()) return check(pattern.str());
  if (pattern.is_list()) {
    for (const Value& item : pattern.list()) {
      if (!item.is_string()) {
        return UnplacedError(
            absl::StrCat(name, "() tuple elements must be strings"));
      }
      if (check(item.str())) return true;
    }
    return false;
  }
  return UnplacedError(
      absl::StrCat(name, "() argument must be a string or tuple of strings"));
}

Value StringMethod(const std::string& self, const std::string& name) {
  if (name == "length") {
    return Value::Int(static_cast<int64_t>(CodePointLength(self)));
  }
  static const std::unordered_set<std::string> kMethods = {
      "upper",   "lower",      "strip",      "lstrip",   "rstrip",
      "title",   "capitalize", "startswith", "endswith", "split",
      "replace", "find",       "count"};
  if (kMethods.count(name) == 0) return Value();
  return Value::Function([self, name](CallArgs& args,
                                      Interpreter*) -> absl::StatusOr<Value> {
    if (name == "upper") return Value::String(JsToUpper(self));
    if (name == "lower") return Value::String(JsToLower(self));
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      bool left = name != "rstrip", right = name != "lstrip";
      const Value* chars = Arg(args, 0, "chars");
      if (chars != nullptr && chars->is_string()) {
        return Value::String(StripChars(self, chars->str(), left, right));
      }
      return Value::String(JsTrim(self, left, right));
    }
    if (name == "title") {
      std::string out = self;
      for (size_t i = 0; i < out.size(); ++i) {
        if (IsAsciiWord(out[i]) && (i == 0 || !IsAsciiWord(out[i - 1]))) {
          out[i] = static_cast<char>(
              std::toupper(static_cast<unsigned char>(out[i])));
        }
      }
      return Value::String(out);
    }
    if (name == "capitalize") {
      std::vector<std::string> cps = CodePoints(self);
      if (cps.empty()) return Value::String("");
      std::string out = JsToUpper(cps[0]);
      for (size_t i = 1; i < cps.size(); ++i) out += cps[i];
      return Value::String(out);
    }
    if (name == "startswith" || name == "endswith") {
      QUANT_ASSIGN_OR_RETURN(bool found,
                             PrefixOrSuffix(self, args, name == "startswith"));
      return Value::Bool(found);
    }
    if (name == "split") return Split(self, args);
    if (name == "replace") {
      if (args.positional.size() < 2) {
        return UnplacedError("replace() requires at least two arguments");
      }
      const Value& a = args.positional[0];
      const Value& b = args.positional[1];
      if (!a.is_string() || !b.is_string()) {
        return UnplacedError("replace() arguments must be strings");
      }
      const Value* count = Arg(args, 2, "count");
      if (count != nullptr && !count->is_int() && !count->is_none()) {
        return UnplacedError("replace() count must be an integer or none");
      }
      int64_t n = count != nullptr && count->is_int() ? count->int_value() : -1;
      return Value::String(ReplaceString(self, a.str(), b.str(), n));
    }
    if (name == "find" || name == "count") {
      if (args.positional.empty() || !args.positional[0].is_string()) {
        return UnplacedError(
            absl::StrCat(name, "() argument must be a string"));
      }
      const std::string& needle = args.positional[0].str();
      if (name == "find") {
        size_t at = self.find(needle);
        if (at == std::string::npos) return Value::Int(-1);
        return Value::Int(
            static_cast<int64_t>(CodePointLength(self.substr(0, at))));
      }
      if (needle.empty()) {
        return Value::Int(static_cast<int64_t>(CodePointLength(self) + 1));
      }
      int64_t n = 0;
      for (size_t at = self.find(needle); at != std::string::npos;
           at = self.find(needle, at + needle.size())) {
        ++n;
      }
      return Value::Int(n);
    }
    return UnplacedError(absl::StrCat("unknown string method '", name, "'"));
  });
}

// Stable sort of `items` by key(item) with CompareValues. Comparing values
// of different kinds is an error; the first one met is returned. After it
// the comparator answers "not less" for every pair (a valid ordering, so
// the sort still ends safely) and the half-sorted items are dropped.
template <typename KeyFn>
absl::Status SortValues(std::vector<Value>* items, KeyFn key,
                        bool case_sensitive, bool reverse) {
  absl::Status error;
  std::stable_sort(
      items->begin(), items->end(), [&](const Value& a, const Value& b) {
        if (!error.ok()) return false;
        absl::StatusOr<int> r = CompareValues(key(a), key(b), case_sensitive);
        if (!r.ok()) {
          error = r.status();
          return false;
        }
        return reverse ? *r > 0 : *r < 0;
      });
  return error;
}

absl::StatusOr<Value> DictSort(const Value& dict, const CallArgs& args) {
  QUANT_ASSIGN_OR_RETURN(bool case_sensitive,
                         BoolArg(args, 0, "case_sensitive", false));
  const Value* by = Arg(args, 1, "by");
  std::string by_value = by != nullptr && by->is_string() ? by->str() : "key";
  if (by_value != "key" && by_value != "value") {
    return UnplacedError("dictsort: by must be 'key' or 'value'");
  }
  QUANT_ASSIGN_OR_RETURN(bool reverse, BoolArg(args, 2, "reverse", false));
  std::vector<Value> items;
  for (const auto& [key, value] : dict.dict().entries()) {
    items.push_back(Value::List({Value::String(key), value}));
  }
  size_t index = by_value == "key" ? 0 : 1;
  QUANT_RETURN_IF_ERROR(SortValues(
      &items, [index](const Value& v) { return v.list()[index]; },
      case_sensitive, reverse));
  return Value::List(std::move(items));
}

Value DictItems(const Value& dict) {
  std::vector<Value> items;
  for (const auto& [key, value] : dict.dict().entries()) {
    items.push_back(Value::List({Value::String(key), value}));
  }
  return Value::List(std::move(items));
}

Value DictMethod(const Value& dict, const std::string& name) {
  if (name == "get") {
    return Value::Function(
        [dict](CallArgs& args, Interpreter*) -> absl::StatusOr<Value> {
          if (args.positional.empty() || !args.positional[0].is_string()) {
            return UnplacedError("dict.get() key must be a string");
          }
          const Value* found = dict.dict().Find(args.positional[0].str());
          if (found != nullptr) return *found;
          if (args.positional.size() > 1) return args.positional[1];
          return Value::None();
        });
  }
  if (name == "items") {
    return Value::Function(
        [dict](CallArgs&, Interpreter*) -> absl::StatusOr<Value> {
          return DictItems(dict);
        });
  }
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return Value::Function(
        [dict, keys](CallArgs&, Interpreter*) -> absl::StatusOr<Value> {
          std::vector<Value> items;
          for (const auto& [key, value] : dict.dict().entries()) {
            items.push_back(keys ? Value::String(key) : value);
          }
          return Value::List(std::move(items));
        });
  }
  if (name == "dictsort") {
    return Value::Function(
        [dict](CallArgs& args, Interpreter*) -> absl::StatusOr<Value> {
          return DictSort(dict, args);
        });
  }
  return Value();
}

// getAttributeValue of the reference: a dotted path through dicts and
// list indices.
Value AttributePath(const Value& item, const std::string& path) {
  Value value = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(
        start, dot == std::string::npos ? std::string::npos : dot - start);
    if (value.is_dict() || value.is_namespace()) {
      const Value* found = value.dict().Find(part);
      value = found != nullptr ? *found : Value();
    } else if (value.is_list()) {
      char* end = nullptr;
      long long index = std::strtoll(part.c_str(), &end, 10);
      if (end == part.c_str() || index < 0 ||
          index >= static_cast<long long>(value.list().size())) {
        return Value();
      }
      value = value.list()[static_cast<size_t>(index)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return value;
}

absl::Status CannotApply(const std::string& name, const Value& operand) {
  return UnplacedError(absl::StrCat("filter '", name, "' cannot be applied to ",
                                    operand.TypeName() == "undefined"
                                        ? std::string("an undefined value")
                                        : "a " + operand.TypeName()));
}

const std::unordered_set<std::string>& KnownFilters() {
  static const std::unordered_set<std::string> kFilters = {
      "safe",    "tojson",  "default", "d",      "join",       "int",
      "float",   "list",    "first",   "last",   "length",     "count",
      "reverse", "sort",    "string",  "unique", "selectattr", "rejectattr",
      "map",     "upper",   "lower",   "title",  "capitalize", "trim",
      "indent",  "replace", "abs",     "items",  "bool",       "dictsort",
      "keys",    "values"};
  return kFilters;
}

absl::StatusOr<std::string> JoinValues(const std::vector<Value>& items,
                                       const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    const Value& item = items[i];
    if (!item.is_none() && !item.is_undefined()) {
      QUANT_ASSIGN_OR_RETURN(std::string text, RawString(item));
      out += text;
    }
  }
  return out;
}

}  // namespace

size_t CodePointLength(absl::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string JsToUpper(absl::string_view s) { return MapCase(s, true); }
std::string JsToLower(absl::string_view s) { return MapCase(s, false); }

std::string JsTrim(absl::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t p = b;
      char32_t c = DecodeUtf8At(s, &p);
      if (!IsJsWhitespace(c)) break;
      b = p;
    }
  }
  if (right) {
    while (e > b) {
      size_t k = e - 1;
      while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      size_t p = k;
      char32_t c = DecodeUtf8At(s, &p);
      if (p != e || !IsJsWhitespace(c)) break;
      e = k;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string Strftime(const std::tm& time, absl::string_view format) {
  static const char* kMonths[] = {
      "January", "February", "March",     "April",   "May",      "June",
      "July",    "August",   "September", "October", "November", "December"};
  auto pad2 = [](int n) {
    return n < 10 ? absl::StrCat("0", n) : absl::StrCat(n);
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    char d = format[i + 1];
    std::string month = kMonths[std::clamp(time.tm_mon, 0, 11)];
    switch (d) {
      case 'Y':
        out += absl::StrCat(time.tm_year + 1900);
        break;
      case 'm':
        out += pad2(time.tm_mon + 1);
        break;
      case 'd':
        out += pad2(time.tm_mday);
        break;
      case 'b':
        out += month.substr(0, 3);
        break;
      case 'B':
        out += month;
        break;
      case 'H':
        out += pad2(time.tm_hour);
        break;
      case 'M':
        out += pad2(time.tm_min);
        break;
      case '%':
        out += "%";
        break;
      default:
        out.push_back('%');
        out.push_back(d);
    }
    ++i;
  }
  return out;
}

absl::StatusOr<std::string> RawString(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return "undefined";
    case ValueKind::kFloat:
      return JsNumberToString(value.float_value());
    case ValueKind::kList:
    case ValueKind::kTuple: {
      std::vector<std::string> parts;
      for (const Value& item : value.list()) {
        QUANT_ASSIGN_OR_RETURN(std::string part, item.ToDisplayString());
        parts.push_back(std::move(part));
      }
      return absl::StrJoin(parts, ",");
    }
    case ValueKind::kDict:
      return "[object Map]";
    default:
      return value.ToDisplayString();
  }
}

absl::StatusOr<int> CompareValues(const Value& a, const Value& b,
                                  bool case_sensitive) {
  auto nullish = [](const Value& v) { return v.is_none() || v.is_undefined(); };
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (nullish(a) || nullish(b)) {
    return UnplacedError(
        absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
  }
  auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    double x = a.number(), y = b.number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    std::string x = case_sensitive ? a.str() : JsToLower(a.str());
    std::string y = case_sensitive ? b.str() : JsToLower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return UnplacedError(
      absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
}

bool IsKnownTest(const std::string& name) {
  static const std::unordered_set<std::string> kTests = {
      "boolean", "callable", "odd",       "even",     "false",
      "true",    "none",     "string",    "number",   "integer",
      "float",   "iterable", "mapping",   "sequence", "lower",
      "upper",   "defined",  "undefined", "equalto",  "eq"};
  return kTests.count(name) > 0;
}

absl::StatusOr<bool> RunTest(const std::string& name, const Value& operand,
                             const Value& argument) {
  if (name == "boolean") return operand.is_bool();
  if (name == "callable") return operand.is_function();
  if (name == "odd" || name == "even") {
    if (!operand.is_int()) {
      return UnplacedError(absl::StrCat(
          "test '", name, "' needs an integer, got ", operand.TypeName()));
    }
    bool odd = operand.int_value() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return operand.is_bool() && !operand.bool_value();
  if (name == "true") return operand.is_bool() && operand.bool_value();
  if (name == "none") return operand.is_none();
  if (name == "string") return operand.is_string();
  if (name == "number") return operand.is_number();
  if (name == "integer") return operand.is_int();
  if (name == "float") return operand.is_float();
  if (name == "iterable") return operand.is_list() || operand.is_string();
  if (name == "mapping") return operand.is_dict();
  if (name == "sequence") {
    return operand.is_list() || operand.is_dict() || operand.is_string();
  }
  if (name == "lower") {
    return operand.is_string() && operand.str() == JsToLower(operand.str());
  }
  if (name == "upper") {
    return operand.is_string() && operand.str() == JsToUpper(operand.str());
  }
  if (name == "defined") return !operand.is_undefined();
  if (name == "undefined") return operand.is_undefined();
  if (name == "equalto" || name == "eq") {
    return Value::StrictEquals(operand, argument);
  }
  return UnplacedError(absl::StrCat("unknown test '", name, "'"));
}

Value GetAttribute(const Value& object, const std::string& name) {
  if (object.is_dict() || object.is_namespace()) {
    const Value* found = object.dict().Find(name);
    if (found != nullptr) return *found;
    if (object.is_dict()) return DictMethod(object, name);
    return Value();
  }
  if (object.is_string()) return StringMethod(object.str(), name);
  if (object.is_list() && name == "length") {
    return Value::Int(static_cast<int64_t>(object.list().size()));
  }
  return Value();
}

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& operand,
                                  CallArgs& args) {
  if (KnownFilters().count(name) == 0) {
    return UnplacedError(absl::StrCat("unknown filter '", name, "'"));
  }
  if (name == "safe") return operand;
  if (name == "tojson") {
    ToJsonOptions options;
    if (const Value* indent = args.Keyword("indent")) {
      if (indent->is_int()) {
        options.indent =
            static_cast<int>(std::clamp<int64_t>(indent->int_value(), 0, 64));
      } else if (!indent->is_none()) {
        return UnplacedError("tojson: indent must be an integer");
      }
    }
    if (const Value* v = args.Keyword("ensure_ascii")) {
      if (!v->is_bool())
        return UnplacedError("tojson: ensure_ascii must be a boolean");
      options.ensure_ascii = v->bool_value();
    }
    if (const Value* v = args.Keyword("sort_keys")) {
      if (!v->is_bool())
        return UnplacedError("tojson: sort_keys must be a boolean");
      options.sort_keys = v->bool_value();
    }
    if (const Value* v = args.Keyword("separators")) {
      if (v->is_list()) {
        if (v->list().size() != 2 || !v->list()[0].is_string() ||
            !v->list()[1].is_string()) {
          return UnplacedError(
              "tojson: separators must be a tuple of two strings");
        }
        options.separators =
            std::make_pair(v->list()[0].str(), v->list()[1].str());
      } else if (!v->is_none()) {
        return UnplacedError(
            "tojson: separators must be a tuple of two strings");
      }
    }
    QUANT_ASSIGN_OR_RETURN(std::string json, ToJson(operand, options));
    return Value::String(std::move(json));
  }
  if (name == "default" || name == "d") {
    Value fallback =
        args.positional.empty() ? Value::String("") : args.positional[0];
    QUANT_ASSIGN_OR_RETURN(bool boolean, BoolArg(args, 1, "boolean", false));
    if (operand.is_undefined() || (boolean && !operand.Truthy())) {
      return fallback;
    }
    return operand;
  }
  if (name == "join") {
    const Value* sep = Arg(args, 0, "separator");
    if (sep != nullptr && !sep->is_string()) {
      return UnplacedError("join: separator must be a string");
    }
    std::string separator = sep != nullptr ? sep->str() : "";
    if (operand.is_string()) {
      return Value::String(absl::StrJoin(CodePoints(operand.str()), separator));
    }
    if (operand.is_list()) {
      QUANT_ASSIGN_OR_RETURN(std::string joined,
                             JoinValues(operand.list(), separator));
      return Value::String(std::move(joined));
    }
    return CannotApply(name, operand);
  }
  if (name == "int" || name == "float") {
    bool to_int = name == "int";
    const Value* fallback = Arg(args, 0, "default");
    if (operand.is_string()) {
      std::optional<double> parsed = JsParseNumber(operand.str(), to_int);
      if (!parsed) {
        if (fallback != nullptr) return *fallback;
        return to_int ? Value::Int(0) : Value::Float(0);
      }
      return to_int ? IntFromDouble(*parsed) : Value::Float(*parsed);
    }
    if (operand.is_number()) {
      return to_int ? IntFromDouble(std::trunc(operand.number()))
                    : Value::Float(operand.number());
    }
    if (operand.is_bool()) {
      return to_int ? Value::Int(operand.bool_value() ? 1 : 0)
                    : Value::Float(operand.bool_value() ? 1 : 0);
    }
    return CannotApply(name, operand);
  }
  if (name == "length" || name == "count") {
    if (operand.is_list()) {
      return Value::Int(static_cast<int64_t>(operand.list().size()));
    }
    if (operand.is_string()) return StringMethod(operand.str(), "length");
    if (operand.is_dict()) {
      return Value::Int(static_cast<int64_t>(operand.dict().size()));
    }
    return CannotApply(name, operand);
  }
  if (name == "string") {
    if (operand.is_string()) return operand;
    if (operand.is_list()) {
      QUANT_ASSIGN_OR_RETURN(std::string json,
                             ToJson(operand, {}, /*undefined_as_null=*/false));
      return Value::String(std::move(json));
    }
    if (operand.is_number() || operand.is_bool()) {
      QUANT_ASSIGN_OR_RETURN(std::string text, operand.ToDisplayString());
      return Value::String(std::move(text));
    }
    return CannotApply(name, operand);
  }
  if (operand.is_list()) {
    const std::vector<Value>& items = operand.list();
    if (name == "list") return operand;
    if (name == "first") return items.empty() ? Value() : items.front();
    if (name == "last") return items.empty() ? Value() : items.back();
    if (name == "reverse") {
      return Value::List(std::vector<Value>(items.rbegin(), items.rend()));
    }
    if (name == "unique") {
      std::vector<Value> out;
      for (const Value& item : items) {
        bool seen = false;
        for (const Value& o : out) seen = seen || Value::StrictEquals(o, item);
        if (!seen) out.push_back(item);
      }
      return Value::List(std::move(out));
    }
    if (name == "sort") {
      QUANT_ASSIGN_OR_RETURN(bool reverse, BoolArg(args, 0, "reverse", false));
      QUANT_ASSIGN_OR_RETURN(bool case_sensitive,
                             BoolArg(args, 1, "case_sensitive", false));
      const Value* attribute = Arg(args, 2, "attribute");
      std::string path;
      bool by_attribute = false;
      if (attribute != nullptr && !attribute->is_none()) {
        if (attribute->is_string()) {
          path = attribute->str();
        } else if (attribute->is_int()) {
          path = absl::StrCat(attribute->int_value());
        } else {
          return UnplacedError(
              "sort: attribute must be a string or an integer");
        }
        by_attribute = true;
      }
      std::vector<Value> out = items;
      QUANT_RETURN_IF_ERROR(SortValues(
          &out,
          [&](const Value& v) {
            return by_attribute ? AttributePath(v, path) : v;
          },
          case_sensitive, reverse));
      return Value::List(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr") {
      bool select = name == "selectattr";
      for (const Value& item : items) {
        if (!item.is_dict() && !item.is_namespace()) {
          return UnplacedError(
              absl::StrCat(name, " can only be applied to a list of objects"));
        }
      }
      if (args.positional.empty() || !args.positional[0].is_string()) {
        return UnplacedError(
            absl::StrCat(name, ": the attribute must be a string"));
      }
      std::string test;
      if (args.positional.size() > 1) {
        if (!args.positional[1].is_string()) {
          return UnplacedError(
              absl::StrCat(name, ": the test must be a string"));
        }
        test = args.positional[1].str();
        if (!IsKnownTest(test))
          return UnplacedError(absl::StrCat("unknown test '", test, "'"));
      }
      Value argument =
          args.positional.size() > 2 ? args.positional[2] : Value();
      std::vector<Value> out;
      for (const Value& item : items) {
        const Value* a = item.dict().Find(args.positional[0].str());
        bool result = false;
        if (a != nullptr && test.empty()) {
          result = a->Truthy();
        } else if (a != nullptr) {
          QUANT_ASSIGN_OR_RETURN(result, RunTest(test, *a, argument));
        }
        if (result == select) out.push_back(item);
      }
      return Value::List(std::move(out));
    }
    if (name == "map") {
      const Value* attribute = args.Keyword("attribute");
      if (attribute == nullptr) {
        return UnplacedError("map: only map(attribute=...) is supported");
      }
      if (!attribute->is_string())
        return UnplacedError("map: attribute must be a string");
      const Value* fallback = args.Keyword("default");
      std::vector<Value> out;
      for (const Value& item : items) {
        if (!item.is_dict() && !item.is_namespace()) {
          return UnplacedError("map: items must be objects");
        }
        Value v = AttributePath(item, attribute->str());
        out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
      }
      return Value::List(std::move(out));
    }
    return CannotApply(name, operand);
  }
  if (operand.is_string()) {
    const std::string& s = operand.str();
    if (name == "upper") return Value::String(JsToUpper(s));
    if (name == "lower") return Value::String(JsToLower(s));
    if (name == "title" || name == "capitalize") {
      CallArgs none;
      return StringMethod(s, name).function()(none, nullptr);
    }
    if (name == "trim") return Value::String(JsTrim(s, true, true));
    if (name == "indent") {
      const Value* width = Arg(args, 0, "width");
      std::string indent = "    ";
      if (width != nullptr) {
        if (width->is_int()) {
          indent = std::string(static_cast<size_t>(std::clamp<int64_t>(
                                   width->int_value(), 0, 1024)),
                               ' ');
        } else if (width->is_string()) {
          indent = width->str();
        } else {
          return UnplacedError("indent: width must be an integer or a string");
        }
      }
      const Value* first = Arg(args, 1, "first");
      const Value* blank = Arg(args, 2, "blank");
      bool indent_first = first != nullptr && first->Truthy();
      bool indent_blank = blank != nullptr && blank->Truthy();
      std::string out;
      size_t start = 0;
      for (size_t line = 0;; ++line) {
        size_t nl = s.find('\n', start);
        std::string part = s.substr(
            start, nl == std::string::npos ? std::string::npos : nl - start);
        bool skip =
            (!indent_first && line == 0) || (!indent_blank && part.empty());
        if (line > 0) out += "\n";
        out += skip ? part : indent + part;
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
      return Value::String(out);
    }
    if (name == "replace") {
      CallArgs copy = args;
      return StringMethod(s, "replace").function()(copy, nullptr);
    }
    return CannotApply(name, operand);
  }
  if (operand.is_number()) {
    if (name == "abs") {
      if (operand.is_int() && operand.int_value() == INT64_MIN) {
        return Value::Float(-static_cast<double>(INT64_MIN));  // Overflows.
      }
      return operand.is_int() ? Value::Int(std::llabs(operand.int_value()))
                              : Value::Float(std::fabs(operand.float_value()));
    }
    return CannotApply(name, operand);
  }
  if (operand.is_dict()) {
    if (name == "items") return DictItems(operand);
    Value method = DictMethod(operand, name);
    if (method.is_function()) {
      return method.function()(args, nullptr);
    }
    return CannotApply(name, operand);
  }
  if (operand.is_bool() && name == "bool") return operand;
  return CannotApply(name, operand);
}

}  // namespace quant::jinja
