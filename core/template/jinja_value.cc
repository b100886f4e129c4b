// Runtime values of the Jinja engine: construction, truthiness, printing and
// the reference's toJSON. See jinja_value.h.
#include "core/template/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"
#include "core/template/jinja_error.h"

namespace quant::jinja {

const Value* CallArgs::Keyword(absl::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

const Value* Dict::Find(absl::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

Value* Dict::FindMutable(absl::string_view key) {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::Set(const std::string& key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(value));
}

void Dict::Clear() {
  // Moved out first: destroying a value may reach this dict again.
  std::vector<std::pair<std::string, Value>> entries = std::move(entries_);
  entries_.clear();
  index_.clear();
}

Value Value::None() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.s_ = std::move(s);
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  v.kind_ = ValueKind::kList;
  v.list_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.kind_ = ValueKind::kTuple;
  return v;
}

Value Value::NewDict() { return DictOf(std::make_shared<Dict>()); }

Value Value::DictOf(std::shared_ptr<Dict> dict) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.dict_ = std::move(dict);
  return v;
}

Value Value::Namespace(std::shared_ptr<Dict> dict) {
  Value v = DictOf(std::move(dict));
  v.kind_ = ValueKind::kNamespace;
  return v;
}

Value Value::Function(NativeFunction fn) {
  Value v;
  v.kind_ = ValueKind::kFunction;
  v.fn_ = std::make_shared<NativeFunction>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Float(static_cast<double>(u));
      }
      return Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: {
      double d = json.get<double>();
      // JavaScript has one number type: Number.isInteger(2.0) is true.
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.0e15) {
        return Int(static_cast<int64_t>(d));
      }
      return Float(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value dict = NewDict();
      for (const auto& [key, item] : json.items()) {
        dict.mutable_dict().Set(key, FromJson(item));
      }
      return dict;
    }
    default:
      return Value();
  }
}

double Value::number() const {
  if (is_int()) return static_cast<double>(i_);
  if (is_bool()) return b_ ? 1 : 0;
  return f_;
}

bool Value::Truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return b_;
    case ValueKind::kInt:
      return i_ != 0;
    case ValueKind::kFloat:
      return f_ != 0 && !std::isnan(f_);
    case ValueKind::kString:
      return !s_.empty();
    case ValueKind::kList:
    case ValueKind::kTuple:
      return !list_->empty();
    case ValueKind::kDict:
      return dict_->size() > 0;
    case ValueKind::kNamespace:
    case ValueKind::kFunction:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case ValueKind::kUndefined:
      return "undefined";
    case ValueKind::kNone:
      return "none";
    case ValueKind::kBool:
      return "boolean";
    case ValueKind::kInt:
      return "integer";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "string";
    case ValueKind::kList:
      return "list";
    case ValueKind::kTuple:
      return "tuple";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kNamespace:
      return "namespace";
    case ValueKind::kFunction:
      return "function";
  }
  return "?";
}

std::string JsNumberToString(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  std::string sign = v < 0 ? "-" : "";
  double a = std::fabs(v);
  // Shortest round-tripping digits.
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, a);
    if (std::strtod(buf, nullptr) == a) break;
  }
  std::string text = buf;
  size_t e = text.find('e');
  int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (text[i] != '.') digits.push_back(text[i]);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int k = static_cast<int>(digits.size());
  int n = exponent + 1;
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(-n, '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += absl::StrCat("e", n - 1 >= 0 ? "+" : "-", std::abs(n - 1));
  }
  return sign + out;
}

absl::StatusOr<std::string> Value::ToDisplayString() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return "undefined";
    case ValueKind::kBool:
      return b_ ? "true" : "false";
    case ValueKind::kInt:
      return absl::StrCat(i_);
    case ValueKind::kFloat:
      if (f_ == 0 && std::signbit(f_)) return "-0.0";
      if (std::isfinite(f_) && f_ == std::trunc(f_) && std::fabs(f_) < 1e21) {
        return JsNumberToString(f_) + ".0";
      }
      return JsNumberToString(f_);
    case ValueKind::kString:
      return s_;
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      return ToJson(*this, ToJsonOptions{}, /*undefined_as_null=*/false);
    case ValueKind::kFunction:
      return "[function]";
  }
  return "";
}

namespace {

// JavaScript Number(string) for the loose == of a string and a number.
double JsStringToNumber(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return 0;
  size_t e = s.find_last_not_of(" \t\n\r\f\v");
  std::string t = s.substr(b, e - b + 1);
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nan("");
  return d;
}

bool IsNullish(const Value& v) { return v.is_undefined() || v.is_none(); }

bool IsPrimitiveNumberLike(const Value& v) {
  return v.is_int() || v.is_float() || v.is_bool();
}

}  // namespace

bool Value::LooseEquals(const Value& a, const Value& b) {
  if (IsNullish(a) || IsNullish(b)) return IsNullish(a) && IsNullish(b);
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (IsPrimitiveNumberLike(a) && IsPrimitiveNumberLike(b)) {
    return a.number() == b.number();
  }
  if (a.is_string() && IsPrimitiveNumberLike(b)) {
    return JsStringToNumber(a.str()) == b.number();
  }
  if (b.is_string() && IsPrimitiveNumberLike(a)) {
    return JsStringToNumber(b.str()) == a.number();
  }
  return StrictEquals(a, b);
}

bool Value::StrictEquals(const Value& a, const Value& b) {
  if (IsNullish(a) || IsNullish(b)) return IsNullish(a) && IsNullish(b);
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  if (a.kind() != b.kind()) {
    if (a.is_list() && b.is_list()) return a.list_ == b.list_;
    return false;
  }
  switch (a.kind()) {
    case ValueKind::kBool:
      return a.b_ == b.b_;
    case ValueKind::kString:
      return a.s_ == b.s_;
    case ValueKind::kList:
    case ValueKind::kTuple:
      return a.list_ == b.list_;
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      return a.dict_ == b.dict_;
    case ValueKind::kFunction:
      return a.fn_ == b.fn_;
    default:
      return false;
  }
}

std::string JsonQuote(absl::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  size_t pos = 0;
  while (pos < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      ++pos;
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            out += absl::StrFormat("\\u%04x", c);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      continue;
    }
    size_t start = pos;
    char32_t cp = DecodeUtf8At(s, &pos);
    if (!ensure_ascii) {
      out.append(s.data() + start, pos - start);
    } else if (cp >= 0x10000) {
      char32_t v = cp - 0x10000;
      out += absl::StrFormat("\\u%04x\\u%04x", 0xD800 + (v >> 10),
                             0xDC00 + (v & 0x3FF));
    } else {
      out += absl::StrFormat("\\u%04x", static_cast<uint32_t>(cp));
    }
  }
  out += "\"";
  return out;
}

absl::StatusOr<std::string> ToJson(const Value& value,
                                   const ToJsonOptions& options,
                                   bool undefined_as_null, int depth) {
  if (depth > kMaxJsonDepth) {
    return LimitError({}, absl::StrCat("value nested deeper than ",
                                       kMaxJsonDepth, " levels"));
  }
  int indent = options.indent.value_or(0);
  std::string item_sep, key_sep;
  if (options.separators) {
    item_sep = options.separators->first;
    key_sep = options.separators->second;
  } else if (indent > 0) {
    item_sep = ",";
    key_sep = ": ";
  } else {
    item_sep = ", ";
    key_sep = ": ";
  }
  switch (value.kind()) {
    case ValueKind::kNone:
      return "null";
    case ValueKind::kUndefined:
      return undefined_as_null ? "null" : "undefined";
    case ValueKind::kBool:
      return value.bool_value() ? "true" : "false";
    case ValueKind::kInt:
      return absl::StrCat(value.int_value());
    case ValueKind::kFloat:
      if (!std::isfinite(value.float_value())) return "null";
      return JsNumberToString(value.float_value());
    case ValueKind::kString:
      return JsonQuote(value.str(), options.ensure_ascii);
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kDict:
    case ValueKind::kNamespace: {
      std::string indent_unit(indent > 0 ? indent : 0, ' ');
      std::string base_padding = "\n";
      for (int i = 0; i < depth; ++i) base_padding += indent_unit;
      std::string child_padding = base_padding + indent_unit;
      std::vector<std::string> parts;
      if (value.is_list()) {
        for (const Value& item : value.list()) {
          QUANT_ASSIGN_OR_RETURN(
              std::string part,
              ToJson(item, options, undefined_as_null, depth + 1));
          parts.push_back(std::move(part));
        }
        std::string out = "[";
        if (indent > 0 && !parts.empty()) {
          for (size_t i = 0; i < parts.size(); ++i) {
            if (i > 0) out += item_sep;
            out += child_padding + parts[i];
          }
          out += base_padding;
        } else {
          for (size_t i = 0; i < parts.size(); ++i) {
            if (i > 0) out += item_sep;
            out += parts[i];
          }
        }
        return out + "]";
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.dict().entries()) {
        entries.push_back(&entry);
      }
      if (options.sort_keys) {
        std::stable_sort(
            entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      std::string out = "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent > 0) out += child_padding;
        QUANT_ASSIGN_OR_RETURN(
            std::string member,
            ToJson(entries[i]->second, options, undefined_as_null, depth + 1));
        out += JsonQuote(entries[i]->first, options.ensure_ascii) + key_sep +
               member;
      }
      if (indent > 0 && !entries.empty()) out += base_padding;
      return out + "}";
    }
    case ValueKind::kFunction:
      return UnplacedError("cannot convert a function to JSON");
  }
  return "";
}

}  // namespace quant::jinja
