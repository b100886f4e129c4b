// Evaluator of the Jinja engine: walks the syntax tree (jinja_ast.h) with a
// chain of variable scopes and produces the output text. Scoping follows
// @huggingface/jinja: `for` bodies and macro bodies get their own scope
// (a `set` inside a loop is not seen after it; use a namespace), `if`
// blocks do not. Errors are absl::Status values (jinja_error.h) naming the
// innermost node that failed; `break` and `continue` end a block with a
// BlockEnd that the loop around it acts on.
#ifndef QUANT_CORE_TEMPLATE_JINJA_INTERPRETER_H_
#define QUANT_CORE_TEMPLATE_JINJA_INTERPRETER_H_

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/template/jinja_ast.h"
#include "core/template/jinja_value.h"

namespace quant::jinja {

// Guards against runaway templates.
struct RenderLimits {
  // Nesting of evaluation (blocks, expressions, macro calls).
  int max_depth = 400;
  // Size of the output and of any string or list built while rendering.
  size_t max_output_bytes = size_t{64} << 20;
  // Evaluation steps (expressions, statements, loop iterations), so that
  // nested loops that print nothing still end.
  int64_t max_steps = 10'000'000;
};

// How a block of statements ended: normally, or at a `break` / `continue`
// (at `pos`) that the loop around it acts on. It travels up through `if`,
// `set` and `filter` blocks, not through a macro call.
struct BlockEnd {
  enum class Kind { kNormal, kBreak, kContinue };
  Kind kind = Kind::kNormal;
  SourcePos pos;
  bool normal() const { return kind == Kind::kNormal; }
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
  // Empties the namespaces made while rendering: one can hold itself
  // (`set ns.me = ns`), and shared_ptr alone would never free it.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Binds the globals (namespace, range, raise_exception, strftime_now,
  // true/false/none and True/False/None) in `scope`.
  void InstallGlobals(Scope* scope);
  // Renders a whole template.
  absl::StatusOr<std::string> Run(const std::vector<NodePtr>& program,
                                  const ScopePtr& scope);

  const std::tm& now() const { return now_; }
  // A new namespace, emptied when rendering ends.
  Value NewNamespace(std::shared_ptr<Dict> dict);

 private:
  friend class DepthGuard;
  // Appends the output of `statements` to `out`.
  absl::StatusOr<BlockEnd> RenderBlock(const std::vector<NodePtr>& statements,
                                       const ScopePtr& scope, std::string* out);
  absl::StatusOr<BlockEnd> ExecuteStatement(const Node& statement,
                                            const ScopePtr& scope,
                                            std::string* out);
  // A statement that the reference evaluates as an expression (a macro
  // definition, a call or filter block, an output tag).
  absl::StatusOr<BlockEnd> ExecuteExpressionStatement(const Node& statement,
                                                      const ScopePtr& scope,
                                                      std::string* out);
  // A macro or caller() body: `break` / `continue` may not leave it.
  absl::StatusOr<Value> RenderCallable(const std::vector<NodePtr>& body,
                                       const ScopePtr& scope);
  absl::StatusOr<Value> Evaluate(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateUnguarded(const Node& node,
                                          const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateList(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateDict(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateTest(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateBinary(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> ApplyBinary(const std::string& op, const Value& left,
                                    const Value& right);
  absl::StatusOr<Value> EvaluateUnary(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateMember(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateSlice(const Value& object, const Node& slice,
                                      const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateCall(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateFilter(const Value& operand, const Node& filter,
                                       const ScopePtr& scope);
  absl::StatusOr<CallArgs> EvaluateArgs(const std::vector<NodePtr>& args,
                                        const ScopePtr& scope);
  absl::StatusOr<BlockEnd> RenderIf(const Node& node, const ScopePtr& scope,
                                    std::string* out);
  absl::StatusOr<BlockEnd> RenderFor(const Node& node, const ScopePtr& scope,
                                     std::string* out);
  absl::StatusOr<std::vector<Value>> LoopItems(const Node& node,
                                               const ScopePtr& loop_scope);
  absl::StatusOr<BlockEnd> ExecuteSet(const Node& node, const ScopePtr& scope);
  void DefineMacro(const Node& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvaluateCallBlock(const Node& node,
                                          const ScopePtr& scope);
  absl::Status BindArguments(const std::string& display_name,
                             const std::vector<NodePtr>& parameters,
                             bool has_kwargs, bool has_varargs, CallArgs args,
                             const ScopePtr& scope);
  // ResourceExhausted (unplaced) past max_output_bytes / max_steps.
  absl::Status CheckSize(size_t bytes) const;
  absl::Status Step();

  RenderLimits limits_;
  std::tm now_;
  int depth_ = 0;
  int64_t steps_ = 0;
  std::vector<std::weak_ptr<Dict>> namespaces_;
  // The `caller` of the macro call a call block is making, consumed by the
  // macro it calls.
  Value pending_caller_;
};

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_INTERPRETER_H_
