// Unary and binary operators of the Jinja engine, as the reference's
// evaluateBinaryExpression does them: `==` is JavaScript loose equality,
// `+` on a string concatenates the other side's text, numbers keep
// int/float apart (int / int is a float), `in` on a list compares
// strictly.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/template/jinja_builtins.h"
#include "core/template/jinja_error.h"
#include "core/template/jinja_interpreter.h"

namespace quant::jinja {
namespace {

bool IsNumeric(const Value& v) { return v.is_int() || v.is_float(); }

Value NumberResult(double result, bool is_float) {
  if (is_float) return Value::Float(result);
  if (!std::isfinite(result) || std::fabs(result) >= 9.2e18) {
    return Value::Float(result);
  }
  return Value::Int(static_cast<int64_t>(result));
}

// String(left) + String(right), leaving out the undefined sides when
// `skip_undefined`.
absl::StatusOr<std::string> Concatenate(const Value& left, const Value& right,
                                        bool skip_undefined) {
  std::string out;
  if (!(skip_undefined && left.is_undefined())) {
    QUANT_ASSIGN_OR_RETURN(out, RawString(left));
  }
  if (!(skip_undefined && right.is_undefined())) {
    QUANT_ASSIGN_OR_RETURN(std::string text, RawString(right));
    out += text;
  }
  return out;
}

absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& left,
                                 const Value& right) {
  bool is_float = left.is_float() || right.is_float();
  double a = left.number(), b = right.number();
  if (op == "+" || op == "-" || op == "*") {
    if (!is_float) {
      int64_t x = left.int_value(), y = right.int_value(), r = 0;
      bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                      : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                  : __builtin_mul_overflow(x, y, &r);
      if (!overflow) return Value::Int(r);
    }
    double r = op == "+" ? a + b : op == "-" ? a - b : a * b;
    return NumberResult(r, is_float);
  }
  if ((op == "/" || op == "//" || op == "%") && b == 0) {
    return UnplacedError("division by zero");
  }
  if (op == "/") return Value::Float(a / b);
  if (op == "//") return NumberResult(std::floor(a / b), is_float);
  if (op == "%") {
    if (!is_float) {
      // INT64_MIN % -1 overflows in C++; the remainder is 0.
      if (right.int_value() == -1) return Value::Int(0);
      return Value::Int(left.int_value() % right.int_value());
    }
    return Value::Float(std::fmod(a, b));
  }
  if (op == "<") return Value::Bool(a < b);
  if (op == ">") return Value::Bool(a > b);
  if (op == "<=") return Value::Bool(a <= b);
  if (op == ">=") return Value::Bool(a >= b);
  return Value();  // Not an arithmetic operator: the caller goes on.
}

}  // namespace

absl::StatusOr<Value> Interpreter::EvaluateUnary(const Node& node,
                                                 const ScopePtr& scope) {
  QUANT_ASSIGN_OR_RETURN(Value v, Evaluate(*node.a, scope));
  if (node.text == "not") return Value::Bool(!v.Truthy());
  double sign = node.text == "-" ? -1 : 1;
  if (v.is_float()) return Value::Float(sign * v.float_value());
  if (v.is_int()) {
    if (node.text != "-") return v;
    int64_t negated = 0;
    if (__builtin_sub_overflow(int64_t{0}, v.int_value(), &negated)) {
      return Value::Float(-static_cast<double>(v.int_value()));
    }
    return Value::Int(negated);
  }
  if (v.is_bool()) return Value::Int(static_cast<int64_t>(sign * v.number()));
  return UnplacedError(absl::StrCat("unary '", node.text,
                                    "' cannot be applied to a ", v.TypeName()));
}

absl::StatusOr<Value> Interpreter::EvaluateBinary(const Node& node,
                                                  const ScopePtr& scope) {
  const std::string& op = node.text;
  QUANT_ASSIGN_OR_RETURN(Value left, Evaluate(*node.a, scope));
  if (op == "and") return left.Truthy() ? Evaluate(*node.b, scope) : left;
  if (op == "or") return left.Truthy() ? left : Evaluate(*node.b, scope);
  QUANT_ASSIGN_OR_RETURN(Value right, Evaluate(*node.b, scope));
  return ApplyBinary(op, left, right);
}

absl::StatusOr<Value> Interpreter::ApplyBinary(const std::string& op,
                                               const Value& left,
                                               const Value& right) {
  if (op == "==") return Value::Bool(Value::LooseEquals(left, right));
  if (op == "!=") return Value::Bool(!Value::LooseEquals(left, right));
  if (IsNumeric(left) && IsNumeric(right) && op != "~" && op != "**") {
    QUANT_ASSIGN_OR_RETURN(Value result, Arithmetic(op, left, right));
    if (!result.is_undefined()) return result;
  } else if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) {
      return Value::Bool(op == "not in");
    }
    if (op == "~" && !left.is_none() && !right.is_none()) {
      QUANT_ASSIGN_OR_RETURN(std::string out,
                             Concatenate(left, right, /*skip_undefined=*/true));
      QUANT_RETURN_IF_ERROR(CheckSize(out.size()));
      return Value::String(std::move(out));
    }
    return UnplacedError(
        absl::StrCat("cannot apply '", op, "' to an undefined value"));
  } else if (left.is_none() || right.is_none()) {
    return UnplacedError(absl::StrCat("cannot apply '", op, "' to none"));
  } else if (op == "~") {
    QUANT_ASSIGN_OR_RETURN(std::string out,
                           Concatenate(left, right, /*skip_undefined=*/false));
    QUANT_RETURN_IF_ERROR(CheckSize(out.size()));
    return Value::String(std::move(out));
  } else if (op == "**" && (IsNumeric(left) || left.is_bool()) &&
             (IsNumeric(right) || right.is_bool())) {
    double a = left.number(), b = right.number();
    if (a == 0 && b < 0) {
      return UnplacedError("0.0 cannot be raised to a negative power");
    }
    double r = std::pow(a, b);
    if (!std::isfinite(r)) {
      return UnplacedError("exponentiation result is not finite");
    }
    return NumberResult(r, left.is_float() || right.is_float() || b < 0);
  } else if (left.is_list() && right.is_list()) {
    if (op == "+") {
      QUANT_RETURN_IF_ERROR(CheckSize(
          (left.list().size() + right.list().size()) * sizeof(Value)));
      std::vector<Value> items = left.list();
      items.insert(items.end(), right.list().begin(), right.list().end());
      return Value::List(std::move(items));
    }
  } else if (right.is_list()) {
    if (op == "in" || op == "not in") {
      bool member = false;
      for (const Value& item : right.list()) {
        if (Value::StrictEquals(item, left)) {
          member = true;
          break;
        }
      }
      return Value::Bool(op == "in" ? member : !member);
    }
  }
  if ((left.is_string() || right.is_string()) && op == "+") {
    QUANT_ASSIGN_OR_RETURN(std::string out,
                           Concatenate(left, right, /*skip_undefined=*/false));
    QUANT_RETURN_IF_ERROR(CheckSize(out.size()));
    return Value::String(std::move(out));
  }
  if (left.is_string() && right.is_string() && (op == "in" || op == "not in")) {
    bool found = right.str().find(left.str()) != std::string::npos;
    return Value::Bool(op == "in" ? found : !found);
  }
  if (left.is_string() && right.is_dict() && (op == "in" || op == "not in")) {
    bool found = right.dict().Find(left.str()) != nullptr;
    return Value::Bool(op == "in" ? found : !found);
  }
  return UnplacedError(absl::StrCat("unsupported operator '", op, "' between ",
                                    left.TypeName(), " and ",
                                    right.TypeName()));
}

}  // namespace quant::jinja
