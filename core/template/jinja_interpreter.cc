// Evaluator of the Jinja engine; see jinja_interpreter.h. The operators are
// in jinja_operators.cc, the global functions in jinja_globals.cc.
#include "core/template/jinja_interpreter.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/template/jinja_builtins.h"
#include "core/template/jinja_error.h"

namespace quant::jinja {
namespace {

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

// "'break' outside a loop" for a block that ended at a break or continue
// where no loop takes it.
absl::Status OutsideLoopError(const BlockEnd& end) {
  return TemplateError(end.pos, end.kind == BlockEnd::Kind::kBreak
                                    ? "'break' outside a loop"
                                    : "'continue' outside a loop");
}

absl::Status BindLoopTarget(const Node& target, const Value& item,
                            Scope* scope) {
  if (target.kind == NodeKind::kIdentifier) {
    scope->Set(target.text, item);
    return absl::OkStatus();
  }
  if (!item.is_list()) {
    return TemplateError(target.pos,
                         absl::StrCat("cannot unpack a ", item.TypeName()));
  }
  if (item.list().size() != target.args.size()) {
    return TemplateError(
        target.pos,
        absl::StrCat("too ",
                     target.args.size() > item.list().size() ? "few" : "many",
                     " items to unpack"));
  }
  for (size_t j = 0; j < target.args.size(); ++j) {
    const Node& name = *target.args[j];
    if (name.kind != NodeKind::kIdentifier) {
      return TemplateError(name.pos, "can only unpack into names");
    }
    scope->Set(name.text, item.list()[j]);
  }
  return absl::OkStatus();
}

// The `loop` variable of iteration i of n.
Value LoopVariable(const std::vector<Value>& items, int64_t i) {
  const int64_t n = static_cast<int64_t>(items.size());
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
  return loop;
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

// Counts one level of evaluation nesting for as long as it lives; status()
// is the depth limit error when that level is one too many.
class DepthGuard {
 public:
  explicit DepthGuard(Interpreter* in) : in_(in) {
    if (++in_->depth_ > in_->limits_.max_depth) {
      status_ =
          LimitError({}, absl::StrCat("recursion depth limit (",
                                      in_->limits_.max_depth, ") exceeded"));
    }
  }
  ~DepthGuard() { --in_->depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  Interpreter* in_;
  absl::Status status_;
};

Interpreter::~Interpreter() {
  for (const std::weak_ptr<Dict>& weak : namespaces_) {
    if (std::shared_ptr<Dict> dict = weak.lock()) dict->Clear();
  }
}

Value Interpreter::NewNamespace(std::shared_ptr<Dict> dict) {
  namespaces_.push_back(dict);
  return Value::Namespace(std::move(dict));
}

absl::Status Interpreter::CheckSize(size_t bytes) const {
  if (bytes <= limits_.max_output_bytes) return absl::OkStatus();
  return LimitError(
      {}, absl::StrCat("output size limit (", limits_.max_output_bytes,
                       " bytes) exceeded"));
}

absl::Status Interpreter::Step() {
  if (++steps_ <= limits_.max_steps) return absl::OkStatus();
  return LimitError(
      {}, absl::StrCat("step limit (", limits_.max_steps, ") exceeded"));
}

absl::StatusOr<std::string> Interpreter::Run(
    const std::vector<NodePtr>& program, const ScopePtr& scope) {
  std::string out;
  QUANT_ASSIGN_OR_RETURN(BlockEnd end, RenderBlock(program, scope, &out));
  if (!end.normal()) return OutsideLoopError(end);
  return out;
}

absl::StatusOr<BlockEnd> Interpreter::RenderBlock(
    const std::vector<NodePtr>& statements, const ScopePtr& scope,
    std::string* out) {
  DepthGuard guard(this);
  QUANT_RETURN_IF_ERROR(guard.status());
  for (const NodePtr& statement : statements) {
    QUANT_RETURN_IF_ERROR(PlaceError(Step(), statement->pos));
    QUANT_ASSIGN_OR_RETURN(BlockEnd end,
                           ExecuteStatement(*statement, scope, out));
    if (!end.normal()) return end;
    QUANT_RETURN_IF_ERROR(CheckSize(out->size()));
  }
  return BlockEnd{};
}

absl::StatusOr<BlockEnd> Interpreter::ExecuteStatement(const Node& statement,
                                                       const ScopePtr& scope,
                                                       std::string* out) {
  switch (statement.kind) {
    case NodeKind::kText:
      *out += statement.text;
      return BlockEnd{};
    case NodeKind::kComment:
      return BlockEnd{};
    case NodeKind::kIf:
      return RenderIf(statement, scope, out);
    case NodeKind::kFor:
      return RenderFor(statement, scope, out);
    case NodeKind::kSet:
      return ExecuteSet(statement, scope);
    default: {
      // These count a level of nesting and name the statement in errors
      // that come up without a position, as an evaluated expression does.
      DepthGuard guard(this);
      absl::StatusOr<BlockEnd> end =
          guard.status().ok()
              ? ExecuteExpressionStatement(statement, scope, out)
              : absl::StatusOr<BlockEnd>(guard.status());
      if (!end.ok()) return PlaceError(end.status(), statement.pos);
      return end;
    }
  }
}

absl::StatusOr<BlockEnd> Interpreter::ExecuteExpressionStatement(
    const Node& statement, const ScopePtr& scope, std::string* out) {
  Value value;
  switch (statement.kind) {
    case NodeKind::kBreak:
      return BlockEnd{BlockEnd::Kind::kBreak, statement.pos};
    case NodeKind::kContinue:
      return BlockEnd{BlockEnd::Kind::kContinue, statement.pos};
    case NodeKind::kMacro:
      DefineMacro(statement, scope);
      return BlockEnd{};
    case NodeKind::kFilterBlock: {
      std::string body;
      QUANT_ASSIGN_OR_RETURN(BlockEnd end,
                             RenderBlock(statement.body, scope, &body));
      if (!end.normal()) return end;
      QUANT_ASSIGN_OR_RETURN(
          value,
          EvaluateFilter(Value::String(std::move(body)), *statement.a, scope));
      break;
    }
    case NodeKind::kCallBlock: {
      QUANT_ASSIGN_OR_RETURN(value, EvaluateCallBlock(statement, scope));
      break;
    }
    default: {
      QUANT_ASSIGN_OR_RETURN(value, Evaluate(statement, scope));
    }
  }
  if (value.is_string()) {
    *out += value.str();
  } else if (!value.is_none() && !value.is_undefined()) {
    QUANT_ASSIGN_OR_RETURN(std::string text, value.ToDisplayString());
    *out += text;
  }
  return BlockEnd{};
}

absl::StatusOr<Value> Interpreter::RenderCallable(
    const std::vector<NodePtr>& body, const ScopePtr& scope) {
  std::string out;
  QUANT_ASSIGN_OR_RETURN(BlockEnd end, RenderBlock(body, scope, &out));
  if (!end.normal()) return OutsideLoopError(end);
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Interpreter::Evaluate(const Node& node,
                                            const ScopePtr& scope) {
  DepthGuard guard(this);
  absl::Status status = guard.status();
  if (status.ok()) status = Step();
  absl::StatusOr<Value> value = status.ok()
                                    ? EvaluateUnguarded(node, scope)
                                    : absl::StatusOr<Value>(std::move(status));
  if (!value.ok()) return PlaceError(value.status(), node.pos);
  return value;
}

absl::StatusOr<Value> Interpreter::EvaluateUnguarded(const Node& node,
                                                     const ScopePtr& scope) {
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
    case NodeKind::kTuple:
      return EvaluateList(node, scope);
    case NodeKind::kDict:
      return EvaluateDict(node, scope);
    case NodeKind::kMember:
      return EvaluateMember(node, scope);
    case NodeKind::kCall:
      return EvaluateCall(node, scope);
    case NodeKind::kBinary:
      return EvaluateBinary(node, scope);
    case NodeKind::kUnary:
      return EvaluateUnary(node, scope);
    case NodeKind::kFilter: {
      QUANT_ASSIGN_OR_RETURN(Value operand, Evaluate(*node.a, scope));
      return EvaluateFilter(operand, *node.b, scope);
    }
    case NodeKind::kTest:
      return EvaluateTest(node, scope);
    case NodeKind::kTernary: {
      QUANT_ASSIGN_OR_RETURN(Value test, Evaluate(*node.a, scope));
      return Evaluate(test.Truthy() ? *node.b : *node.c, scope);
    }
    case NodeKind::kSelect: {
      QUANT_ASSIGN_OR_RETURN(Value test, Evaluate(*node.b, scope));
      if (!test.Truthy()) return Value();
      return Evaluate(*node.a, scope);
    }
    case NodeKind::kComment:
      return Value::None();
    default:
      // Statements are executed by ExecuteStatement; slices, keyword
      // arguments and spreads only by the node that holds them.
      break;
  }
  return UnplacedError("unexpected expression here");
}

absl::StatusOr<Value> Interpreter::EvaluateList(const Node& node,
                                                const ScopePtr& scope) {
  std::vector<Value> items;
  for (const auto& item : node.args) {
    QUANT_ASSIGN_OR_RETURN(Value value, Evaluate(*item, scope));
    items.push_back(std::move(value));
  }
  return node.kind == NodeKind::kList ? Value::List(std::move(items))
                                      : Value::Tuple(std::move(items));
}

absl::StatusOr<Value> Interpreter::EvaluateDict(const Node& node,
                                                const ScopePtr& scope) {
  Value dict = Value::NewDict();
  for (size_t i = 0; i + 1 < node.args.size(); i += 2) {
    QUANT_ASSIGN_OR_RETURN(Value key, Evaluate(*node.args[i], scope));
    if (!key.is_string()) {
      return TemplateError(
          node.args[i]->pos,
          absl::StrCat("dict keys must be strings, got ", key.TypeName()));
    }
    QUANT_ASSIGN_OR_RETURN(Value value, Evaluate(*node.args[i + 1], scope));
    dict.mutable_dict().Set(key.str(), std::move(value));
  }
  return dict;
}

absl::StatusOr<Value> Interpreter::EvaluateTest(const Node& node,
                                                const ScopePtr& scope) {
  QUANT_ASSIGN_OR_RETURN(Value operand, Evaluate(*node.a, scope));
  if (!IsKnownTest(node.text)) {
    return TemplateError(node.pos,
                         absl::StrCat("unknown test '", node.text, "'"));
  }
  QUANT_ASSIGN_OR_RETURN(bool result, RunTest(node.text, operand, Value()));
  return Value::Bool(node.negate ? !result : result);
}

absl::StatusOr<Value> Interpreter::EvaluateSlice(const Value& object,
                                                 const Node& slice,
                                                 const ScopePtr& scope) {
  if (!object.is_list() && !object.is_string()) {
    return UnplacedError(absl::StrCat("cannot slice a ", object.TypeName()));
  }
  auto bound = [&](const NodePtr& n) -> absl::StatusOr<std::optional<int64_t>> {
    if (!n) return std::nullopt;
    QUANT_ASSIGN_OR_RETURN(Value v, Evaluate(*n, scope));
    if (v.is_undefined()) return std::nullopt;
    if (!v.is_int()) return UnplacedError("slice bounds must be integers");
    return v.int_value();
  };
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> start, bound(slice.a));
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> stop, bound(slice.b));
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> step_opt, bound(slice.c));
  int64_t step = step_opt.value_or(1);
  if (step == 0) return UnplacedError("slice step cannot be zero");
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
  for (int64_t i = b; step > 0 ? i < e : i > e;) {
    if (object.is_string()) {
      text += chars[static_cast<size_t>(i)];
    } else {
      items.push_back(object.list()[static_cast<size_t>(i)]);
    }
    // A step past the end of int64 is past the end of the sequence.
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (object.is_string()) return Value::String(std::move(text));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> Interpreter::EvaluateMember(const Node& node,
                                                  const ScopePtr& scope) {
  QUANT_ASSIGN_OR_RETURN(Value object, Evaluate(*node.a, scope));
  Value property;
  if (node.computed) {
    if (node.b->kind == NodeKind::kSlice) {
      return EvaluateSlice(object, *node.b, scope);
    }
    QUANT_ASSIGN_OR_RETURN(property, Evaluate(*node.b, scope));
  } else if (node.b->kind == NodeKind::kInteger) {
    property = Value::Int(node.b->integer);
  } else {
    property = Value::String(node.b->text);
  }
  auto cannot_index = [&] {
    return UnplacedError(absl::StrCat("cannot index a ", object.TypeName(),
                                      " with a ", property.TypeName()));
  };
  if (object.is_dict() || object.is_namespace()) {
    if (!property.is_string()) return cannot_index();
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
    return cannot_index();
  }
  if (!property.is_string()) return cannot_index();
  return GetAttribute(object, property.str());
}

absl::StatusOr<CallArgs> Interpreter::EvaluateArgs(
    const std::vector<NodePtr>& args, const ScopePtr& scope) {
  CallArgs out;
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kSpread) {
      QUANT_ASSIGN_OR_RETURN(Value v, Evaluate(*arg->a, scope));
      if (!v.is_list()) {
        return TemplateError(arg->pos,
                             absl::StrCat("cannot unpack a ", v.TypeName()));
      }
      for (const Value& item : v.list()) out.positional.push_back(item);
    } else if (arg->kind != NodeKind::kKeywordArg &&
               arg->kind != NodeKind::kKeywordSpread) {
      QUANT_ASSIGN_OR_RETURN(Value v, Evaluate(*arg, scope));
      out.positional.push_back(std::move(v));
    }
  }
  auto add = [&](const std::string& key, Value v,
                 SourcePos pos) -> absl::Status {
    if (out.Keyword(key) != nullptr) {
      return TemplateError(pos, absl::StrCat("keyword argument '", key,
                                             "' given more than once"));
    }
    out.keyword.emplace_back(key, std::move(v));
    return absl::OkStatus();
  };
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kKeywordArg) {
      QUANT_ASSIGN_OR_RETURN(Value v, Evaluate(*arg->a, scope));
      QUANT_RETURN_IF_ERROR(add(arg->text, std::move(v), arg->pos));
    } else if (arg->kind == NodeKind::kKeywordSpread) {
      QUANT_ASSIGN_OR_RETURN(Value v, Evaluate(*arg->a, scope));
      if (!v.is_dict()) {
        return TemplateError(arg->pos, "argument after ** must be a mapping");
      }
      for (const auto& [k, item] : v.dict().entries()) {
        QUANT_RETURN_IF_ERROR(add(k, item, arg->pos));
      }
    }
  }
  return out;
}

absl::StatusOr<Value> Interpreter::EvaluateCall(const Node& node,
                                                const ScopePtr& scope) {
  QUANT_ASSIGN_OR_RETURN(CallArgs args, EvaluateArgs(node.args, scope));
  QUANT_ASSIGN_OR_RETURN(Value fn, Evaluate(*node.a, scope));
  if (!fn.is_function()) {
    const Node& callee = *node.a;
    if (callee.kind == NodeKind::kMember && !callee.computed) {
      return TemplateError(callee.pos,
                           absl::StrCat("unknown method '", callee.b->text,
                                        "' (or not callable)"));
    }
    if (callee.kind == NodeKind::kIdentifier) {
      return TemplateError(
          callee.pos, absl::StrCat("'", callee.text, "' is not a function (",
                                   fn.TypeName(), ")"));
    }
    return UnplacedError(absl::StrCat("cannot call a ", fn.TypeName()));
  }
  pending_caller_ = Value();
  return fn.function()(args, this);
}

absl::StatusOr<Value> Interpreter::EvaluateFilter(const Value& operand,
                                                  const Node& filter,
                                                  const ScopePtr& scope) {
  CallArgs args;
  const Node* name_node = &filter;
  if (filter.kind == NodeKind::kCall) {
    name_node = filter.a.get();
    if (name_node->kind != NodeKind::kIdentifier) {
      return TemplateError(filter.pos, "expected a filter name");
    }
    QUANT_ASSIGN_OR_RETURN(args, EvaluateArgs(filter.args, scope));
  }
  absl::StatusOr<Value> result = ApplyFilter(name_node->text, operand, args);
  if (result.ok() && result->is_string()) {
    absl::Status size = CheckSize(result->str().size());
    if (!size.ok()) result = size;
  }
  if (!result.ok()) return PlaceError(result.status(), name_node->pos);
  return result;
}

absl::StatusOr<BlockEnd> Interpreter::RenderIf(const Node& node,
                                               const ScopePtr& scope,
                                               std::string* out) {
  QUANT_ASSIGN_OR_RETURN(Value test, Evaluate(*node.a, scope));
  return RenderBlock(test.Truthy() ? node.body : node.alternate, scope, out);
}

// The items a `for` visits: the list, or a dict's keys, less those its `if`
// filter rejects.
absl::StatusOr<std::vector<Value>> Interpreter::LoopItems(
    const Node& node, const ScopePtr& loop_scope) {
  QUANT_ASSIGN_OR_RETURN(Value iterable, Evaluate(*node.b, loop_scope));
  std::vector<Value> candidates;
  if (iterable.is_dict()) {
    for (const auto& entry : iterable.dict().entries()) {
      candidates.push_back(Value::String(entry.first));
    }
  } else if (iterable.is_list()) {
    candidates = iterable.list();
  } else {
    return TemplateError(node.b->pos, absl::StrCat("cannot iterate over a ",
                                                   iterable.TypeName()));
  }
  std::vector<Value> items;
  for (const Value& candidate : candidates) {
    if (node.c) {
      auto test_scope = std::make_shared<Scope>(loop_scope);
      QUANT_RETURN_IF_ERROR(
          BindLoopTarget(*node.a, candidate, test_scope.get()));
      QUANT_ASSIGN_OR_RETURN(Value keep, Evaluate(*node.c, test_scope));
      if (!keep.Truthy()) continue;
    } else if (node.a->kind == NodeKind::kTuple) {
      Scope check;
      QUANT_RETURN_IF_ERROR(BindLoopTarget(*node.a, candidate, &check));
    }
    items.push_back(candidate);
  }
  return items;
}

absl::StatusOr<BlockEnd> Interpreter::RenderFor(const Node& node,
                                                const ScopePtr& scope,
                                                std::string* out) {
  auto loop_scope = std::make_shared<Scope>(scope);
  QUANT_ASSIGN_OR_RETURN(std::vector<Value> items, LoopItems(node, loop_scope));
  // The reference renders the `else` block unless an iteration ran to its
  // end; an iteration cut short by break or continue drops its output.
  bool no_iteration = true;
  const size_t loop_start = out->size();
  for (size_t i = 0; i < items.size(); ++i) {
    QUANT_RETURN_IF_ERROR(PlaceError(Step(), node.pos));
    loop_scope->Set("loop", LoopVariable(items, static_cast<int64_t>(i)));
    QUANT_RETURN_IF_ERROR(BindLoopTarget(*node.a, items[i], loop_scope.get()));
    const size_t iteration_start = out->size();
    QUANT_ASSIGN_OR_RETURN(BlockEnd end,
                           RenderBlock(node.body, loop_scope, out));
    if (!end.normal()) out->resize(iteration_start);
    if (end.kind == BlockEnd::Kind::kContinue) continue;
    if (end.kind == BlockEnd::Kind::kBreak) break;
    QUANT_RETURN_IF_ERROR(CheckSize(out->size() - loop_start));
    no_iteration = false;
  }
  if (no_iteration) return RenderBlock(node.alternate, loop_scope, out);
  return BlockEnd{};
}

absl::StatusOr<BlockEnd> Interpreter::ExecuteSet(const Node& node,
                                                 const ScopePtr& scope) {
  Value rhs;
  if (node.b) {
    QUANT_ASSIGN_OR_RETURN(rhs, Evaluate(*node.b, scope));
  } else {
    std::string body;
    QUANT_ASSIGN_OR_RETURN(BlockEnd end, RenderBlock(node.body, scope, &body));
    if (!end.normal()) return end;
    rhs = Value::String(std::move(body));
  }
  const Node& target = *node.a;
  if (target.kind == NodeKind::kIdentifier) {
    scope->Set(target.text, std::move(rhs));
    return BlockEnd{};
  }
  if (target.kind == NodeKind::kTuple) {
    if (!rhs.is_list()) {
      return TemplateError(target.pos,
                           absl::StrCat("cannot unpack a ", rhs.TypeName()));
    }
    QUANT_RETURN_IF_ERROR(BindLoopTarget(target, rhs, scope.get()));
    return BlockEnd{};
  }
  if (target.kind == NodeKind::kMember && !target.computed &&
      target.b->kind == NodeKind::kIdentifier) {
    QUANT_ASSIGN_OR_RETURN(Value object, Evaluate(*target.a, scope));
    if (!object.is_namespace()) {
      return TemplateError(target.pos,
                           "cannot assign an attribute of anything but a "
                           "namespace");
    }
    object.mutable_dict().Set(target.b->text, std::move(rhs));
    return BlockEnd{};
  }
  return TemplateError(target.pos, "invalid target of 'set'");
}

absl::Status Interpreter::BindArguments(const std::string& display_name,
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
    return UnplacedError(absl::StrCat("macro ", display_name,
                                      " takes no keyword argument '",
                                      args.keyword.front().first, "'"));
  }
  if (has_varargs) {
    std::vector<Value> rest;
    for (size_t i = parameters.size(); i < args.positional.size(); ++i) {
      rest.push_back(args.positional[i]);
    }
    scope->Set("varargs", Value::List(std::move(rest)));
  } else if (args.positional.size() > parameters.size()) {
    return UnplacedError(absl::StrCat("macro ", display_name,
                                      " takes not more than ",
                                      parameters.size(), " argument(s)"));
  }
  for (const auto& [name, fallback] : pending) {
    QUANT_ASSIGN_OR_RETURN(Value value, Evaluate(*fallback, scope));
    scope->Set(name, std::move(value));
  }
  return absl::OkStatus();
}

void Interpreter::DefineMacro(const Node& node, const ScopePtr& scope) {
  const Node* macro = &node;
  SpecialNames special = SpecialNamesOf(node.args, node.body);
  std::weak_ptr<Scope> defining = scope;
  scope->Set(node.text,
             Value::Function(
                 [macro, special, defining](
                     CallArgs& args, Interpreter* in) -> absl::StatusOr<Value> {
                   ScopePtr parent = defining.lock();
                   if (!parent) {
                     return UnplacedError("macro called after its scope ended");
                   }
                   Value caller = std::move(in->pending_caller_);
                   in->pending_caller_ = Value();
                   if (special.caller) {
                     parent = std::make_shared<Scope>(parent);
                     parent->Set("caller", std::move(caller));
                   }
                   auto macro_scope = std::make_shared<Scope>(parent);
                   QUANT_RETURN_IF_ERROR(in->BindArguments(
                       absl::StrCat("'", macro->text, "'"), macro->args,
                       special.kwargs, special.varargs, args, macro_scope));
                   return in->RenderCallable(macro->body, macro_scope);
                 }));
}

absl::StatusOr<Value> Interpreter::EvaluateCallBlock(const Node& node,
                                                     const ScopePtr& scope) {
  const Node* block = &node;
  SpecialNames special = SpecialNamesOf(node.args, node.body);
  std::weak_ptr<Scope> defining = scope;
  Value caller = Value::Function(
      [block, special, defining](CallArgs& args,
                                 Interpreter* in) -> absl::StatusOr<Value> {
        ScopePtr parent = defining.lock();
        if (!parent)
          return UnplacedError("caller() used after its scope ended");
        auto env = std::make_shared<Scope>(parent);
        QUANT_RETURN_IF_ERROR(in->BindArguments(
            "None", block->args, special.kwargs, special.varargs, args, env));
        return in->RenderCallable(block->body, env);
      });
  const Node& call = *node.a;
  QUANT_ASSIGN_OR_RETURN(CallArgs args, EvaluateArgs(call.args, scope));
  QUANT_ASSIGN_OR_RETURN(Value fn, Evaluate(*call.a, scope));
  if (!fn.is_function()) {
    return TemplateError(call.pos,
                         absl::StrCat("'", call.a->text, "' is not a macro"));
  }
  pending_caller_ = std::move(caller);
  return fn.function()(args, this);
}

}  // namespace quant::jinja
