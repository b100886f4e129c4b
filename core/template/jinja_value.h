// Runtime values of the Jinja engine (core/template): undefined, none, bool,
// int, float, string, list, tuple, dict (insertion-ordered), namespace and
// callable. Lists, dicts and namespaces are shared by reference, as in the
// reference implementation (@huggingface/jinja), so `set ns.x = ...` on a
// namespace is seen by every holder of it. Printing and JSON follow that
// reference's JavaScript conventions (true/false, 1.0, JSON.stringify).
#ifndef QUANT_CORE_TEMPLATE_JINJA_VALUE_H_
#define QUANT_CORE_TEMPLATE_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant::jinja {

// A position in the template source, 1-based; line 0 means "unknown".
struct SourcePos {
  int line = 0;
  int column = 0;
};

class Value;
class Interpreter;

// Arguments of a call: positional, then keyword arguments in order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(absl::string_view name) const;
};

// A built-in or macro; errors it returns without a position get the call's.
using NativeFunction =
    std::function<absl::StatusOr<Value>(CallArgs&, Interpreter*)>;

// Insertion-ordered string-keyed map.
class Dict {
 public:
  const Value* Find(absl::string_view key) const;
  Value* FindMutable(absl::string_view key);
  void Set(const std::string& key, Value value);
  // Drops every entry (Interpreter breaks namespace reference cycles so).
  void Clear();
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, Value>>& entries() const {
    return entries_;
  }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kDict,
  kNamespace,
  kFunction,
};

class Value {
 public:
  Value() = default;  // Undefined.
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value NewDict();
  static Value DictOf(std::shared_ptr<Dict> dict);
  static Value Namespace(std::shared_ptr<Dict> dict);
  static Value Function(NativeFunction fn);
  // JSON -> value as the reference's convertToRuntimeValues does: numbers
  // with an integral value become ints, object member order is kept.
  static Value FromJson(const nlohmann::ordered_json& json);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  // Lists and tuples.
  bool is_list() const {
    return kind_ == ValueKind::kList || kind_ == ValueKind::kTuple;
  }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_namespace() const { return kind_ == ValueKind::kNamespace; }
  bool is_function() const { return kind_ == ValueKind::kFunction; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  double float_value() const { return f_; }
  // Int or float as a double; bools as 0/1.
  double number() const;
  const std::string& str() const { return s_; }
  const std::vector<Value>& list() const { return *list_; }
  std::vector<Value>& mutable_list() { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_dict() { return *dict_; }
  const std::shared_ptr<Dict>& dict_ptr() const { return dict_; }
  const NativeFunction& function() const { return *fn_; }

  // Python-style truthiness as the reference implements it.
  bool Truthy() const;
  // Type name for error messages ("string", "list", ...).
  std::string TypeName() const;
  // What {{ value }} prints (undefined and none print nothing there; this
  // returns the reference's String() of the value). Fails only for a
  // container holding a function, which has no JSON form.
  absl::StatusOr<std::string> ToDisplayString() const;
  // JavaScript `a.value == b.value` (loose equality, identity for lists
  // and dicts), which the reference uses for == and !=.
  static bool LooseEquals(const Value& a, const Value& b);
  // JavaScript `a.value === b.value`, used by `in` and unique.
  static bool StrictEquals(const Value& a, const Value& b);

 private:
  ValueKind kind_ = ValueKind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<std::vector<Value>> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<NativeFunction> fn_;
};

// JavaScript Number.prototype.toString for a double.
std::string JsNumberToString(double v);

struct ToJsonOptions {
  std::optional<int> indent;  // Unset or 0: one line.
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;
};

// The reference's toJSON: Python json.dumps-like separators (", " and ": ";
// "," and ": " with an indent), strings escaped as JSON.stringify does
// (non-ASCII kept unless ensure_ascii). `undefined_as_null` false prints
// undefined members as `undefined` (the reference's String() of a list).
// Fails (unplaced) on a function, and on nesting deeper than
// kMaxJsonDepth (a namespace can contain itself).
inline constexpr int kMaxJsonDepth = 512;
absl::StatusOr<std::string> ToJson(const Value& value,
                                   const ToJsonOptions& options,
                                   bool undefined_as_null = true,
                                   int depth = 0);

// JSON.stringify of a string.
std::string JsonQuote(absl::string_view s, bool ensure_ascii);

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_VALUE_H_
