// Evaluator of the Jinja engine: walks the syntax tree (jinja_ast.h) with a
// chain of variable scopes and produces the output text. Scoping follows
// @huggingface/jinja: `for` bodies and macro bodies get their own scope
// (a `set` inside a loop is not seen after it; use a namespace), `if`
// blocks do not. Errors are thrown as JinjaError with the position of the
// node that failed; Template::Render turns them into absl::Status.
#ifndef QUANT_CORE_TEMPLATE_JINJA_INTERPRETER_H_
#define QUANT_CORE_TEMPLATE_JINJA_INTERPRETER_H_

#include <cstddef>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/template/jinja_ast.h"
#include "core/template/jinja_value.h"

namespace quant::jinja {

// Guards against runaway templates.
struct RenderLimits {
  // Nesting of evaluation (blocks, expressions, macro calls).
  int max_depth = 400;
  // Size of the output and of any string or list built while rendering.
  size_t max_output_bytes = size_t{64} << 20;
};

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr)
      : parent_(std::move(parent)) {}
  // The innermost binding of `name`, or null.
  const Value* Lookup(const std::string& name) const;
  void Set(const std::string& name, Value value);
  bool HasOwn(const std::string& name) const { return vars_.count(name) > 0; }

 private:
  std::unordered_map<std::string, Value> vars_;
  std::shared_ptr<Scope> parent_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(RenderLimits limits, std::tm now) : limits_(limits), now_(now) {}

  // Binds the globals (namespace, range, raise_exception, strftime_now,
  // true/false/none and True/False/None) in `scope`.
  void InstallGlobals(Scope* scope);
  // Renders a whole template.
  std::string Run(const std::vector<NodePtr>& program, const ScopePtr& scope);

  const std::tm& now() const { return now_; }

 private:
  friend class DepthGuard;
  std::string RenderBlock(const std::vector<NodePtr>& statements,
                          const ScopePtr& scope);
  Value Evaluate(const Node& node, const ScopePtr& scope);
  Value EvaluateUnguarded(const Node& node, const ScopePtr& scope);
  Value EvaluateBinary(const Node& node, const ScopePtr& scope);
  Value EvaluateUnary(const Node& node, const ScopePtr& scope);
  Value EvaluateMember(const Node& node, const ScopePtr& scope);
  Value EvaluateSlice(const Value& object, const Node& slice,
                      const ScopePtr& scope);
  Value EvaluateCall(const Node& node, const ScopePtr& scope);
  Value EvaluateFilter(const Value& operand, const Node& filter,
                       const ScopePtr& scope);
  CallArgs EvaluateArgs(const std::vector<NodePtr>& args,
                        const ScopePtr& scope);
  std::string RenderIf(const Node& node, const ScopePtr& scope);
  std::string RenderFor(const Node& node, const ScopePtr& scope);
  void ExecuteSet(const Node& node, const ScopePtr& scope);
  void DefineMacro(const Node& node, const ScopePtr& scope);
  Value EvaluateCallBlock(const Node& node, const ScopePtr& scope);
  void BindArguments(const std::string& display_name,
                     const std::vector<NodePtr>& parameters, bool has_kwargs,
                     bool has_varargs, CallArgs args, const ScopePtr& scope);
  void CheckSize(size_t bytes) const;

  RenderLimits limits_;
  std::tm now_;
  int depth_ = 0;
  // The `caller` of the macro call a call block is making, consumed by the
  // macro it calls.
  Value pending_caller_;
};

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_INTERPRETER_H_
