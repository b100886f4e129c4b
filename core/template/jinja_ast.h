// Syntax tree of the Jinja engine: one node type with a kind tag and the
// fields each kind uses (listed beside each kind below).
#ifndef QUANT_CORE_TEMPLATE_JINJA_AST_H_
#define QUANT_CORE_TEMPLATE_JINJA_AST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/template/jinja_value.h"

namespace quant::jinja {

enum class NodeKind {
  // Statements.
  kText,         // text: literal output.
  kComment,      //
  kIf,           // a: test; body; alternate.
  kFor,          // a: loop target (identifier/tuple); b: iterable; c: the
                 // `if` filter or null; body; alternate (the else block).
  kSet,          // a: target; b: value or null (then body is the block).
  kMacro,        // text: name; args: parameters; body.
  kCallBlock,    // a: the call (kCall); args: caller parameters; body.
  kFilterBlock,  // a: filter (identifier or call); body.
  kBreak,
  kContinue,
  // Expressions.
  kIdentifier,     // text: name.
  kInteger,        // integer.
  kFloat,          // number.
  kString,         // text.
  kList,           // args: items.
  kTuple,          // args: items.
  kDict,           // args: key, value, key, value, ...
  kMember,         // a: object; b: property; computed.
  kSlice,          // a, b, c: start, stop, step (each may be null).
  kCall,           // a: callee; args.
  kBinary,         // text: operator; a, b.
  kUnary,          // text: operator (not, -, +); a.
  kFilter,         // a: operand; b: filter (identifier or call).
  kTest,           // a: operand; text: test name; negate.
  kTernary,        // a: condition; b: if true; c: if false.
  kSelect,         // a: value; b: condition (`x if c` without else).
  kKeywordArg,     // text: name; a: value.
  kSpread,         // a: value (*x).
  kKeywordSpread,  // a: value (**x).
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  Node(NodeKind k, SourcePos p) : kind(k), pos(p) {}
  NodeKind kind;
  SourcePos pos;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  bool computed = false;
  bool negate = false;
  NodePtr a, b, c;
  std::vector<NodePtr> args;
  std::vector<NodePtr> body;
  std::vector<NodePtr> alternate;
};

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_AST_H_
