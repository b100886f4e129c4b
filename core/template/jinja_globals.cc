// Global functions of the Jinja engine (Interpreter::InstallGlobals):
// namespace, range, raise_exception, strftime_now and the constants.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/template/jinja_builtins.h"
#include "core/template/jinja_error.h"
#include "core/template/jinja_interpreter.h"

namespace quant::jinja {
namespace {

absl::StatusOr<Value> RaiseException(CallArgs& args, Interpreter*) {
  std::vector<std::string> parts;
  for (const Value& v : args.positional) {
    QUANT_ASSIGN_OR_RETURN(std::string part, v.ToDisplayString());
    parts.push_back(std::move(part));
  }
  return RaisedError(absl::StrJoin(parts, ","));
}

absl::StatusOr<Value> StrftimeNow(CallArgs& args, Interpreter* in) {
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return UnplacedError("strftime_now() needs a format string");
  }
  return Value::String(Strftime(in->now(), args.positional[0].str()));
}

absl::StatusOr<Value> MakeNamespace(CallArgs& args, Interpreter* in) {
  if (args.positional.size() > 1) {
    return UnplacedError("namespace() takes at most 1 positional argument");
  }
  auto dict = std::make_shared<Dict>();
  if (args.positional.size() == 1) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [k, v] : source.dict().entries()) dict->Set(k, v);
    } else if (source.is_list()) {
      for (const Value& pair : source.list()) {
        if (!pair.is_list() || pair.list().size() != 2 ||
            !pair.list()[0].is_string()) {
          return UnplacedError("namespace() expects [key, value] pairs");
        }
        dict->Set(pair.list()[0].str(), pair.list()[1]);
      }
    } else {
      return UnplacedError(absl::StrCat("namespace(): a ", source.TypeName(),
                                        " is not iterable"));
    }
  }
  for (const auto& [k, v] : args.keyword) dict->Set(k, v);
  return in->NewNamespace(std::move(dict));
}

Value IntOrFloat(double value) {
  if (!std::isfinite(value) || std::fabs(value) >= 9.2e18) {
    return Value::Float(value);
  }
  return Value::Int(static_cast<int64_t>(value));
}

}  // namespace

void Interpreter::InstallGlobals(Scope* scope) {
  scope->Set("true", Value::Bool(true));
  scope->Set("false", Value::Bool(false));
  scope->Set("none", Value::None());
  scope->Set("True", Value::Bool(true));
  scope->Set("False", Value::Bool(false));
  scope->Set("None", Value::None());
  scope->Set("raise_exception", Value::Function(RaiseException));
  scope->Set("strftime_now", Value::Function(StrftimeNow));
  scope->Set("namespace", Value::Function(MakeNamespace));
  // A member lambda: it checks the list's size against limits_.
  scope->Set(
      "range", Value::Function([](CallArgs& args,
                                  Interpreter* in) -> absl::StatusOr<Value> {
        std::vector<double> n;
        for (const Value& v : args.positional) {
          if (!v.is_number()) {
            return UnplacedError("range() arguments must be numbers");
          }
          n.push_back(v.number());
        }
        if (n.empty() || n.size() > 3) {
          return UnplacedError("range() takes 1 to 3 arguments");
        }
        double start = n.size() == 1 ? 0 : n[0];
        double stop = n.size() == 1 ? n[0] : n[1];
        double step = n.size() == 3 ? n[2] : 1;
        if (step == 0) return UnplacedError("range() step must not be zero");
        // Eight bytes an item count against the size limit, checked
        // up front and while filling (a step too small to move a large
        // start would otherwise never end).
        const size_t max_items = in->limits_.max_output_bytes / 8;
        double count = std::ceil((stop - start) / step);
        if (count > static_cast<double>(max_items)) {
          return in->CheckSize(std::numeric_limits<size_t>::max());
        }
        std::vector<Value> out;
        for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
          if (out.size() >= max_items) {
            return in->CheckSize(std::numeric_limits<size_t>::max());
          }
          out.push_back(IntOrFloat(i));
        }
        return Value::List(std::move(out));
      }));
}

}  // namespace quant::jinja
