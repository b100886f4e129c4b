// Evaluator of the Jinja engine; see jinja_interpreter.h. Operators follow
// the reference's evaluateBinaryExpression: `==` is JavaScript loose
// equality, `+` on a string concatenates the other side's text, numbers
// keep int/float apart (int / int is a float), `in` on a list compares
// strictly.
#include "core/template/jinja_interpreter.h"

#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/template/jinja_builtins.h"

namespace quant::jinja {
namespace {

struct BreakSignal {
  SourcePos pos;
};
struct ContinueSignal {
  SourcePos pos;
};

[[noreturn]] void Fail(const std::string& message) {
  throw JinjaError({}, message);
}

// Which of caller / kwargs / varargs a macro body uses without declaring.
struct SpecialNames {
  bool caller = false;
  bool kwargs = false;
  bool varargs = false;
};

void FindSpecialNames(const Node* node, SpecialNames* out) {
  if (node == nullptr) return;
  if (node->kind == NodeKind::kIdentifier) {
    if (node->text == "caller") out->caller = true;
    if (node->text == "kwargs") out->kwargs = true;
    if (node->text == "varargs") out->varargs = true;
    return;
  }
  if (node->kind == NodeKind::kMember && !node->computed) {
    FindSpecialNames(node->a.get(), out);
    return;
  }
  FindSpecialNames(node->a.get(), out);
  FindSpecialNames(node->b.get(), out);
  FindSpecialNames(node->c.get(), out);
  for (const auto& n : node->args) FindSpecialNames(n.get(), out);
  for (const auto& n : node->body) FindSpecialNames(n.get(), out);
  for (const auto& n : node->alternate) FindSpecialNames(n.get(), out);
}

SpecialNames SpecialNamesOf(const std::vector<NodePtr>& parameters,
                            const std::vector<NodePtr>& body) {
  SpecialNames found;
  for (const auto& n : body) FindSpecialNames(n.get(), &found);
  for (const auto& p : parameters) {
    if (p->kind == NodeKind::kKeywordArg) FindSpecialNames(p->a.get(), &found);
  }
  for (const auto& p : parameters) {
    const std::string& name = p->text;
    if (name == "caller") found.caller = false;
    if (name == "kwargs") found.kwargs = false;
    if (name == "varargs") found.varargs = false;
  }
  return found;
}

bool IsNumeric(const Value& v) { return v.is_int() || v.is_float(); }

Value NumberResult(double result, bool is_float) {
  if (is_float) return Value::Float(result);
  if (!std::isfinite(result) || std::fabs(result) >= 9.2e18) {
    return Value::Float(result);
  }
  return Value::Int(static_cast<int64_t>(result));
}

}  // namespace

const Value* Scope::Lookup(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

void Scope::Set(const std::string& name, Value value) {
  vars_[name] = std::move(value);
}

class DepthGuard {
 public:
  DepthGuard(Interpreter* in) : in_(in) {
    if (++in_->depth_ > in_->limits_.max_depth) {
      --in_->depth_;
      throw JinjaError({},
                       absl::StrCat("recursion depth limit (",
                                    in_->limits_.max_depth, ") exceeded"),
                       false, true);
    }
  }
  ~DepthGuard() { --in_->depth_; }

 private:
  Interpreter* in_;
};

void Interpreter::CheckSize(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    throw JinjaError({},
                     absl::StrCat("output size limit (",
                                  limits_.max_output_bytes, " bytes) exceeded"),
                     false, true);
  }
}

void Interpreter::InstallGlobals(Scope* scope) {
  scope->Set("true", Value::Bool(true));
  scope->Set("false", Value::Bool(false));
  scope->Set("none", Value::None());
  scope->Set("True", Value::Bool(true));
  scope->Set("False", Value::Bool(false));
  scope->Set("None", Value::None());
  scope->Set("raise_exception",
             Value::Function([](CallArgs& args, Interpreter*) -> Value {
               std::vector<std::string> parts;
               for (const Value& v : args.positional) {
                 parts.push_back(v.ToDisplayString());
               }
               throw JinjaError({}, absl::StrJoin(parts, ","), true);
             }));
  scope->Set(
      "strftime_now",
      Value::Function([](CallArgs& args, Interpreter* in) -> Value {
        if (args.positional.empty() || !args.positional[0].is_string()) {
          Fail("strftime_now() needs a format string");
        }
        return Value::String(Strftime(in->now(), args.positional[0].str()));
      }));
  scope->Set(
      "range", Value::Function([](CallArgs& args, Interpreter* in) -> Value {
        std::vector<double> n;
        for (const Value& v : args.positional) {
          if (!v.is_number()) Fail("range() arguments must be numbers");
          n.push_back(v.number());
        }
        if (n.empty() || n.size() > 3) {
          Fail("range() takes 1 to 3 arguments");
        }
        double start = n.size() == 1 ? 0 : n[0];
        double stop = n.size() == 1 ? n[0] : n[1];
        double step = n.size() == 3 ? n[2] : 1;
        if (step == 0) Fail("range() step must not be zero");
        double count = std::ceil((stop - start) / step);
        if (count * 8 > static_cast<double>(in->limits_.max_output_bytes)) {
          in->CheckSize(static_cast<size_t>(count) * 8);
        }
        std::vector<Value> out;
        if (step > 0) {
          for (double i = start; i < stop; i += step) {
            out.push_back(NumberResult(i, false));
          }
        } else {
          for (double i = start; i > stop; i += step) {
            out.push_back(NumberResult(i, false));
          }
        }
        return Value::List(std::move(out));
      }));
  scope->Set("namespace",
             Value::Function([](CallArgs& args, Interpreter*) -> Value {
               if (args.positional.size() > 1) {
                 Fail("namespace() takes at most 1 positional argument");
               }
               auto dict = std::make_shared<Dict>();
               if (args.positional.size() == 1) {
                 const Value& source = args.positional[0];
                 if (source.is_dict()) {
                   for (const auto& [k, v] : source.dict().entries()) {
                     dict->Set(k, v);
                   }
                 } else if (source.is_list()) {
                   for (const Value& pair : source.list()) {
                     if (!pair.is_list() || pair.list().size() != 2 ||
                         !pair.list()[0].is_string()) {
                       Fail("namespace() expects [key, value] pairs");
                     }
                     dict->Set(pair.list()[0].str(), pair.list()[1]);
                   }
                 } else {
                   Fail(absl::StrCat("namespace(): a ", source.TypeName(),
                                     " is not iterable"));
                 }
               }
               for (const auto& [k, v] : args.keyword) dict->Set(k, v);
               return Value::Namespace(std::move(dict));
             }));
}

std::string Interpreter::Run(const std::vector<NodePtr>& program,
                             const ScopePtr& scope) {
  try {
    return RenderBlock(program, scope);
  } catch (const BreakSignal& b) {
    throw JinjaError(b.pos, "'break' outside a loop");
  } catch (const ContinueSignal& c) {
    throw JinjaError(c.pos, "'continue' outside a loop");
  }
}

std::string Interpreter::RenderBlock(const std::vector<NodePtr>& statements,
                                     const ScopePtr& scope) {
  DepthGuard guard(this);
  std::string result;
  for (const NodePtr& statement : statements) {
    switch (statement->kind) {
      case NodeKind::kText:
        result += statement->text;
        break;
      case NodeKind::kIf:
        result += RenderIf(*statement, scope);
        break;
      case NodeKind::kFor:
        result += RenderFor(*statement, scope);
        break;
      case NodeKind::kSet:
        ExecuteSet(*statement, scope);
        break;
      case NodeKind::kComment:
        break;
      default: {
        Value v = Evaluate(*statement, scope);
        if (!v.is_none() && !v.is_undefined()) {
          if (v.is_string()) {
            result += v.str();
          } else {
            try {
              result += v.ToDisplayString();
            } catch (JinjaError& e) {
              e.set_pos_if_unknown(statement->pos);
              throw;
            }
          }
        }
      }
    }
    CheckSize(result.size());
  }
  return result;
}

Value Interpreter::Evaluate(const Node& node, const ScopePtr& scope) {
  try {
    DepthGuard guard(this);
    return EvaluateUnguarded(node, scope);
  } catch (JinjaError& e) {
    e.set_pos_if_unknown(node.pos);
    throw;
  }
}

Value Interpreter::EvaluateUnguarded(const Node& node, const ScopePtr& scope) {
  switch (node.kind) {
    case NodeKind::kText:
    case NodeKind::kString:
      return Value::String(node.text);
    case NodeKind::kInteger:
      return Value::Int(node.integer);
    case NodeKind::kFloat:
      return Value::Float(node.number);
    case NodeKind::kIdentifier: {
      const Value* v = scope->Lookup(node.text);
      return v != nullptr ? *v : Value();
    }
    case NodeKind::kList:
    case NodeKind::kTuple: {
      std::vector<Value> items;
      for (const auto& item : node.args)
        items.push_back(Evaluate(*item, scope));
      return node.kind == NodeKind::kList ? Value::List(std::move(items))
                                          : Value::Tuple(std::move(items));
    }
    case NodeKind::kDict: {
      Value dict = Value::NewDict();
      for (size_t i = 0; i + 1 < node.args.size(); i += 2) {
        Value key = Evaluate(*node.args[i], scope);
        if (!key.is_string()) {
          throw JinjaError(
              node.args[i]->pos,
              absl::StrCat("dict keys must be strings, got ", key.TypeName()));
        }
        dict.mutable_dict().Set(key.str(), Evaluate(*node.args[i + 1], scope));
      }
      return dict;
    }
    case NodeKind::kMember:
      return EvaluateMember(node, scope);
    case NodeKind::kCall:
      return EvaluateCall(node, scope);
    case NodeKind::kBinary:
      return EvaluateBinary(node, scope);
    case NodeKind::kUnary:
      return EvaluateUnary(node, scope);
    case NodeKind::kFilter: {
      Value operand = Evaluate(*node.a, scope);
      return EvaluateFilter(operand, *node.b, scope);
    }
    case NodeKind::kTest: {
      Value operand = Evaluate(*node.a, scope);
      if (!IsKnownTest(node.text)) {
        throw JinjaError(node.pos,
                         absl::StrCat("unknown test '", node.text, "'"));
      }
      bool result = RunTest(node.text, operand, Value());
      return Value::Bool(node.negate ? !result : result);
    }
    case NodeKind::kTernary:
      return Evaluate(*node.a, scope).Truthy() ? Evaluate(*node.b, scope)
                                               : Evaluate(*node.c, scope);
    case NodeKind::kSelect:
      if (!Evaluate(*node.b, scope).Truthy()) return Value();
      return Evaluate(*node.a, scope);
    case NodeKind::kIf:
      return Value::String(RenderIf(node, scope));
    case NodeKind::kFor:
      return Value::String(RenderFor(node, scope));
    case NodeKind::kSet:
      ExecuteSet(node, scope);
      return Value::None();
    case NodeKind::kMacro:
      DefineMacro(node, scope);
      return Value::None();
    case NodeKind::kCallBlock:
      return EvaluateCallBlock(node, scope);
    case NodeKind::kFilterBlock: {
      Value body = Value::String(RenderBlock(node.body, scope));
      return EvaluateFilter(body, *node.a, scope);
    }
    case NodeKind::kComment:
      return Value::None();
    case NodeKind::kBreak:
      throw BreakSignal{node.pos};
    case NodeKind::kContinue:
      throw ContinueSignal{node.pos};
    case NodeKind::kSlice:
    case NodeKind::kKeywordArg:
    case NodeKind::kSpread:
    case NodeKind::kKeywordSpread:
      break;
  }
  Fail("unexpected expression here");
}

Value Interpreter::EvaluateUnary(const Node& node, const ScopePtr& scope) {
  Value v = Evaluate(*node.a, scope);
  if (node.text == "not") return Value::Bool(!v.Truthy());
  double sign = node.text == "-" ? -1 : 1;
  if (v.is_float()) return Value::Float(sign * v.float_value());
  if (v.is_int()) {
    return Value::Int(node.text == "-" ? -v.int_value() : v.int_value());
  }
  if (v.is_bool()) return Value::Int(static_cast<int64_t>(sign * v.number()));
  Fail(absl::StrCat("unary '", node.text, "' cannot be applied to a ",
                    v.TypeName()));
}

Value Interpreter::EvaluateBinary(const Node& node, const ScopePtr& scope) {
  const std::string& op = node.text;
  Value left = Evaluate(*node.a, scope);
  if (op == "and") return left.Truthy() ? Evaluate(*node.b, scope) : left;
  if (op == "or") return left.Truthy() ? left : Evaluate(*node.b, scope);
  Value right = Evaluate(*node.b, scope);
  if (op == "==") return Value::Bool(Value::LooseEquals(left, right));
  if (op == "!=") return Value::Bool(!Value::LooseEquals(left, right));
  if (IsNumeric(left) && IsNumeric(right) && op != "~" && op != "**") {
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
    if (op == "/") {
      if (b == 0) Fail("division by zero");
      return Value::Float(a / b);
    }
    if (op == "//") {
      if (b == 0) Fail("division by zero");
      return NumberResult(std::floor(a / b), is_float);
    }
    if (op == "%") {
      if (b == 0) Fail("division by zero");
      if (!is_float) return Value::Int(left.int_value() % right.int_value());
      return Value::Float(std::fmod(a, b));
    }
    if (op == "<") return Value::Bool(a < b);
    if (op == ">") return Value::Bool(a > b);
    if (op == "<=") return Value::Bool(a <= b);
    if (op == ">=") return Value::Bool(a >= b);
  } else if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) {
      return Value::Bool(op == "not in");
    }
    if (op == "~" && !left.is_none() && !right.is_none()) {
      std::string out = (left.is_undefined() ? "" : RawString(left)) +
                        (right.is_undefined() ? "" : RawString(right));
      CheckSize(out.size());
      return Value::String(std::move(out));
    }
    Fail(absl::StrCat("cannot apply '", op, "' to an undefined value"));
  } else if (left.is_none() || right.is_none()) {
    Fail(absl::StrCat("cannot apply '", op, "' to none"));
  } else if (op == "~") {
    std::string out = RawString(left) + RawString(right);
    CheckSize(out.size());
    return Value::String(std::move(out));
  } else if (op == "**" && (IsNumeric(left) || left.is_bool()) &&
             (IsNumeric(right) || right.is_bool())) {
    double a = left.number(), b = right.number();
    if (a == 0 && b < 0) Fail("0.0 cannot be raised to a negative power");
    double r = std::pow(a, b);
    if (!std::isfinite(r)) Fail("exponentiation result is not finite");
    return NumberResult(r, left.is_float() || right.is_float() || b < 0);
  } else if (left.is_list() && right.is_list()) {
    if (op == "+") {
      std::vector<Value> items = left.list();
      items.insert(items.end(), right.list().begin(), right.list().end());
      CheckSize(items.size() * sizeof(Value));
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
    std::string out = RawString(left) + RawString(right);
    CheckSize(out.size());
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
  Fail(absl::StrCat("unsupported operator '", op, "' between ", left.TypeName(),
                    " and ", right.TypeName()));
}

Value Interpreter::EvaluateSlice(const Value& object, const Node& slice,
                                 const ScopePtr& scope) {
  if (!object.is_list() && !object.is_string()) {
    Fail(absl::StrCat("cannot slice a ", object.TypeName()));
  }
  auto bound = [&](const NodePtr& n) -> std::optional<int64_t> {
    if (!n) return std::nullopt;
    Value v = Evaluate(*n, scope);
    if (v.is_undefined()) return std::nullopt;
    if (!v.is_int()) Fail("slice bounds must be integers");
    return v.int_value();
  };
  std::optional<int64_t> start = bound(slice.a), stop = bound(slice.b),
                         step_opt = bound(slice.c);
  int64_t step = step_opt.value_or(1);
  if (step == 0) Fail("slice step cannot be zero");
  std::vector<std::string> chars;
  if (object.is_string()) {
    size_t pos = 0;
    const std::string& s = object.str();
    while (pos < s.size()) {
      size_t begin = pos;
      ++pos;
      while (pos < s.size() &&
             (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) {
        ++pos;
      }
      chars.push_back(s.substr(begin, pos - begin));
    }
  }
  int64_t length = object.is_string()
                       ? static_cast<int64_t>(chars.size())
                       : static_cast<int64_t>(object.list().size());
  int64_t b, e;
  if (step > 0) {
    b = start.value_or(0);
    b = b < 0 ? std::max<int64_t>(length + b, 0) : std::min(b, length);
    e = stop.value_or(length);
    e = e < 0 ? std::max<int64_t>(length + e, 0) : std::min(e, length);
  } else {
    b = start.value_or(length - 1);
    b = b < 0 ? std::max<int64_t>(length + b, -1) : std::min(b, length - 1);
    e = stop.value_or(-1);
    e = e < -1 ? std::max<int64_t>(length + e, -1) : std::min(e, length - 1);
  }
  std::vector<Value> items;
  std::string text;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
    if (object.is_string()) {
      text += chars[static_cast<size_t>(i)];
    } else {
      items.push_back(object.list()[static_cast<size_t>(i)]);
    }
  }
  if (object.is_string()) return Value::String(std::move(text));
  return Value::List(std::move(items));
}

Value Interpreter::EvaluateMember(const Node& node, const ScopePtr& scope) {
  Value object = Evaluate(*node.a, scope);
  Value property;
  if (node.computed) {
    if (node.b->kind == NodeKind::kSlice) {
      return EvaluateSlice(object, *node.b, scope);
    }
    property = Evaluate(*node.b, scope);
  } else if (node.b->kind == NodeKind::kInteger) {
    property = Value::Int(node.b->integer);
  } else {
    property = Value::String(node.b->text);
  }
  if (object.is_dict() || object.is_namespace()) {
    if (!property.is_string()) {
      Fail(absl::StrCat("cannot index a ", object.TypeName(), " with a ",
                        property.TypeName()));
    }
    return GetAttribute(object, property.str());
  }
  if (object.is_list() || object.is_string()) {
    if (property.is_int()) {
      int64_t i = property.int_value();
      if (object.is_list()) {
        int64_t n = static_cast<int64_t>(object.list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        return object.list()[static_cast<size_t>(i)];
      }
      // Code points (the reference indexes UTF-16 units).
      std::vector<size_t> starts;
      const std::string& s = object.str();
      for (size_t k = 0; k < s.size(); ++k) {
        if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) {
          starts.push_back(k);
        }
      }
      int64_t n = static_cast<int64_t>(starts.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      size_t begin = starts[static_cast<size_t>(i)];
      size_t end = i + 1 < n ? starts[static_cast<size_t>(i + 1)] : s.size();
      return Value::String(s.substr(begin, end - begin));
    }
    if (property.is_string()) return GetAttribute(object, property.str());
    Fail(absl::StrCat("cannot index a ", object.TypeName(), " with a ",
                      property.TypeName()));
  }
  if (!property.is_string()) {
    Fail(absl::StrCat("cannot index a ", object.TypeName(), " with a ",
                      property.TypeName()));
  }
  return GetAttribute(object, property.str());
}

CallArgs Interpreter::EvaluateArgs(const std::vector<NodePtr>& args,
                                   const ScopePtr& scope) {
  CallArgs out;
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kSpread) {
      Value v = Evaluate(*arg->a, scope);
      if (!v.is_list()) {
        throw JinjaError(arg->pos,
                         absl::StrCat("cannot unpack a ", v.TypeName()));
      }
      for (const Value& item : v.list()) out.positional.push_back(item);
    } else if (arg->kind != NodeKind::kKeywordArg &&
               arg->kind != NodeKind::kKeywordSpread) {
      out.positional.push_back(Evaluate(*arg, scope));
    }
  }
  auto add = [&](const std::string& key, Value v, SourcePos pos) {
    if (out.Keyword(key) != nullptr) {
      throw JinjaError(pos, absl::StrCat("keyword argument '", key,
                                         "' given more than once"));
    }
    out.keyword.emplace_back(key, std::move(v));
  };
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kKeywordArg) {
      add(arg->text, Evaluate(*arg->a, scope), arg->pos);
    } else if (arg->kind == NodeKind::kKeywordSpread) {
      Value v = Evaluate(*arg->a, scope);
      if (!v.is_dict()) {
        throw JinjaError(arg->pos, "argument after ** must be a mapping");
      }
      for (const auto& [k, item] : v.dict().entries()) add(k, item, arg->pos);
    }
  }
  return out;
}

Value Interpreter::EvaluateCall(const Node& node, const ScopePtr& scope) {
  CallArgs args = EvaluateArgs(node.args, scope);
  Value fn = Evaluate(*node.a, scope);
  if (!fn.is_function()) {
    const Node& callee = *node.a;
    if (callee.kind == NodeKind::kMember && !callee.computed) {
      throw JinjaError(callee.pos,
                       absl::StrCat("unknown method '", callee.b->text,
                                    "' (or not callable)"));
    }
    if (callee.kind == NodeKind::kIdentifier) {
      throw JinjaError(callee.pos,
                       absl::StrCat("'", callee.text, "' is not a function (",
                                    fn.TypeName(), ")"));
    }
    Fail(absl::StrCat("cannot call a ", fn.TypeName()));
  }
  pending_caller_ = Value();
  return fn.function()(args, this);
}

Value Interpreter::EvaluateFilter(const Value& operand, const Node& filter,
                                  const ScopePtr& scope) {
  CallArgs args;
  const Node* name_node = &filter;
  if (filter.kind == NodeKind::kCall) {
    name_node = filter.a.get();
    if (name_node->kind != NodeKind::kIdentifier) {
      throw JinjaError(filter.pos, "expected a filter name");
    }
    args = EvaluateArgs(filter.args, scope);
  }
  try {
    Value result = ApplyFilter(name_node->text, operand, args);
    if (result.is_string()) CheckSize(result.str().size());
    return result;
  } catch (JinjaError& e) {
    e.set_pos_if_unknown(name_node->pos);
    throw;
  }
}

std::string Interpreter::RenderIf(const Node& node, const ScopePtr& scope) {
  bool test = Evaluate(*node.a, scope).Truthy();
  return RenderBlock(test ? node.body : node.alternate, scope);
}

namespace {

void BindLoopTarget(const Node& target, const Value& item, Scope* scope) {
  if (target.kind == NodeKind::kIdentifier) {
    scope->Set(target.text, item);
    return;
  }
  if (!item.is_list()) {
    throw JinjaError(target.pos,
                     absl::StrCat("cannot unpack a ", item.TypeName()));
  }
  if (item.list().size() != target.args.size()) {
    throw JinjaError(
        target.pos,
        absl::StrCat("too ",
                     target.args.size() > item.list().size() ? "few" : "many",
                     " items to unpack"));
  }
  for (size_t j = 0; j < target.args.size(); ++j) {
    const Node& name = *target.args[j];
    if (name.kind != NodeKind::kIdentifier) {
      throw JinjaError(name.pos, "can only unpack into names");
    }
    scope->Set(name.text, item.list()[j]);
  }
}

}  // namespace

std::string Interpreter::RenderFor(const Node& node, const ScopePtr& scope) {
  auto loop_scope = std::make_shared<Scope>(scope);
  Value iterable = Evaluate(*node.b, loop_scope);
  std::vector<Value> candidates;
  if (iterable.is_dict()) {
    for (const auto& entry : iterable.dict().entries()) {
      candidates.push_back(Value::String(entry.first));
    }
  } else if (iterable.is_list()) {
    candidates = iterable.list();
  } else {
    throw JinjaError(node.b->pos, absl::StrCat("cannot iterate over a ",
                                               iterable.TypeName()));
  }
  std::vector<Value> items;
  for (const Value& candidate : candidates) {
    if (node.c) {
      auto test_scope = std::make_shared<Scope>(loop_scope);
      BindLoopTarget(*node.a, candidate, test_scope.get());
      if (!Evaluate(*node.c, test_scope).Truthy()) continue;
    } else if (node.a->kind == NodeKind::kTuple) {
      Scope check;
      BindLoopTarget(*node.a, candidate, &check);
    }
    items.push_back(candidate);
  }
  std::string result;
  bool no_iteration = true;
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    Value loop = Value::NewDict();
    Dict& d = loop.mutable_dict();
    d.Set("index", Value::Int(i + 1));
    d.Set("index0", Value::Int(i));
    d.Set("revindex", Value::Int(n - i));
    d.Set("revindex0", Value::Int(n - i - 1));
    d.Set("first", Value::Bool(i == 0));
    d.Set("last", Value::Bool(i == n - 1));
    d.Set("length", Value::Int(n));
    d.Set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
    d.Set("nextitem", i < n - 1 ? items[static_cast<size_t>(i + 1)] : Value());
    loop_scope->Set("loop", loop);
    BindLoopTarget(*node.a, items[static_cast<size_t>(i)], loop_scope.get());
    try {
      result += RenderBlock(node.body, loop_scope);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    CheckSize(result.size());
    no_iteration = false;
  }
  if (no_iteration) result += RenderBlock(node.alternate, loop_scope);
  return result;
}

void Interpreter::ExecuteSet(const Node& node, const ScopePtr& scope) {
  Value rhs = node.b ? Evaluate(*node.b, scope)
                     : Value::String(RenderBlock(node.body, scope));
  const Node& target = *node.a;
  if (target.kind == NodeKind::kIdentifier) {
    scope->Set(target.text, std::move(rhs));
    return;
  }
  if (target.kind == NodeKind::kTuple) {
    if (!rhs.is_list()) {
      throw JinjaError(target.pos,
                       absl::StrCat("cannot unpack a ", rhs.TypeName()));
    }
    BindLoopTarget(target, rhs, scope.get());
    return;
  }
  if (target.kind == NodeKind::kMember && !target.computed &&
      target.b->kind == NodeKind::kIdentifier) {
    Value object = Evaluate(*target.a, scope);
    if (!object.is_namespace()) {
      throw JinjaError(target.pos,
                       "cannot assign an attribute of anything but a "
                       "namespace");
    }
    object.mutable_dict().Set(target.b->text, std::move(rhs));
    return;
  }
  throw JinjaError(target.pos, "invalid target of 'set'");
}

void Interpreter::BindArguments(const std::string& display_name,
                                const std::vector<NodePtr>& parameters,
                                bool has_kwargs, bool has_varargs,
                                CallArgs args, const ScopePtr& scope) {
  std::vector<std::pair<std::string, const Node*>> pending;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Node& p = *parameters[i];
    const std::string& name = p.text;
    const Node* fallback =
        p.kind == NodeKind::kKeywordArg ? p.a.get() : nullptr;
    std::optional<Value> value;
    if (i < args.positional.size()) {
      value = args.positional[i];
    } else {
      for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
        if (it->first == name) {
          value = std::move(it->second);
          args.keyword.erase(it);
          break;
        }
      }
    }
    if (!value && fallback != nullptr) pending.emplace_back(name, fallback);
    scope->Set(name, value ? std::move(*value) : Value());
  }
  if (has_kwargs) {
    Value kwargs = Value::NewDict();
    for (auto& [k, v] : args.keyword) kwargs.mutable_dict().Set(k, v);
    scope->Set("kwargs", kwargs);
  } else if (!args.keyword.empty()) {
    Fail(absl::StrCat("macro ", display_name, " takes no keyword argument '",
                      args.keyword.front().first, "'"));
  }
  if (has_varargs) {
    std::vector<Value> rest;
    for (size_t i = parameters.size(); i < args.positional.size(); ++i) {
      rest.push_back(args.positional[i]);
    }
    scope->Set("varargs", Value::List(std::move(rest)));
  } else if (args.positional.size() > parameters.size()) {
    Fail(absl::StrCat("macro ", display_name, " takes not more than ",
                      parameters.size(), " argument(s)"));
  }
  for (const auto& [name, fallback] : pending) {
    scope->Set(name, Evaluate(*fallback, scope));
  }
}

void Interpreter::DefineMacro(const Node& node, const ScopePtr& scope) {
  const Node* macro = &node;
  SpecialNames special = SpecialNamesOf(node.args, node.body);
  std::weak_ptr<Scope> defining = scope;
  scope->Set(
      node.text, Value::Function([macro, special, defining](
                                     CallArgs& args, Interpreter* in) -> Value {
        ScopePtr parent = defining.lock();
        if (!parent) Fail("macro called after its scope ended");
        Value caller = std::move(in->pending_caller_);
        in->pending_caller_ = Value();
        if (special.caller) {
          parent = std::make_shared<Scope>(parent);
          parent->Set("caller", std::move(caller));
        }
        auto macro_scope = std::make_shared<Scope>(parent);
        in->BindArguments(absl::StrCat("'", macro->text, "'"), macro->args,
                          special.kwargs, special.varargs, args, macro_scope);
        return Value::String(in->RenderBlock(macro->body, macro_scope));
      }));
}

Value Interpreter::EvaluateCallBlock(const Node& node, const ScopePtr& scope) {
  const Node* block = &node;
  SpecialNames special = SpecialNamesOf(node.args, node.body);
  std::weak_ptr<Scope> defining = scope;
  Value caller = Value::Function(
      [block, special, defining](CallArgs& args, Interpreter* in) -> Value {
        ScopePtr parent = defining.lock();
        if (!parent) Fail("caller() used after its scope ended");
        auto env = std::make_shared<Scope>(parent);
        in->BindArguments("None", block->args, special.kwargs, special.varargs,
                          args, env);
        return Value::String(in->RenderBlock(block->body, env));
      });
  const Node& call = *node.a;
  CallArgs args = EvaluateArgs(call.args, scope);
  Value fn = Evaluate(*call.a, scope);
  if (!fn.is_function()) {
    throw JinjaError(call.pos,
                     absl::StrCat("'", call.a->text, "' is not a macro"));
  }
  pending_caller_ = std::move(caller);
  return fn.function()(args, this);
}

}  // namespace quant::jinja
