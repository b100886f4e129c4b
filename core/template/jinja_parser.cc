// Parser of the Jinja engine; see jinja_parser.h. Every step returns the
// first syntax error it meets, which ends the parse.
#include "core/template/jinja_parser.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/template/jinja_error.h"

namespace quant::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<std::vector<NodePtr>> Run() {
    std::vector<NodePtr> program;
    while (current_ < tokens_.size()) {
      QUANT_ASSIGN_OR_RETURN(NodePtr statement, ParseAny());
      program.push_back(std::move(statement));
    }
    return program;
  }

 private:
  // Counts one level of recursion for as long as it lives; Check() refuses
  // nesting deeper than kMaxParseDepth.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    absl::Status Check(SourcePos pos) const {
      if (p_->depth_ <= kMaxParseDepth) return absl::OkStatus();
      return LimitError(pos, absl::StrCat("template nesting deeper than ",
                                          kMaxParseDepth, " levels"));
    }

   private:
    Parser* p_;
  };

  // A left-associative chain (a + b + c, a.b.c, x | f | g) nests its tree
  // one level per link although it is parsed in a loop: each link counts as
  // a level for as long as the chain is being parsed, so the tree's height
  // (and the recursion that evaluates and frees it) stays under
  // kMaxParseDepth.
  class ChainGuard {
   public:
    explicit ChainGuard(Parser* p) : p_(p) {}
    ~ChainGuard() { p_->depth_ -= links_; }
    ChainGuard(const ChainGuard&) = delete;
    ChainGuard& operator=(const ChainGuard&) = delete;
    absl::Status Link(SourcePos pos) {
      ++links_;
      ++p_->depth_;
      if (p_->depth_ <= kMaxParseDepth) return absl::OkStatus();
      return LimitError(pos, absl::StrCat("template nesting deeper than ",
                                          kMaxParseDepth, " levels"));
    }

   private:
    Parser* p_;
    int links_ = 0;
  };

  SourcePos PosHere() const {
    if (current_ < tokens_.size()) return tokens_[current_].pos;
    return tokens_.empty() ? SourcePos{1, 1} : tokens_.back().pos;
  }
  absl::Status Error(absl::string_view message) const {
    return TemplateError(PosHere(), message);
  }
  std::string Describe() const {
    if (current_ >= tokens_.size()) return "end of template";
    const Token& t = tokens_[current_];
    if (t.type == TokenType::kIdentifier ||
        t.type == TokenType::kNumericLiteral)
      return absl::StrCat("'", t.value, "'");
    if (t.type == TokenType::kStringLiteral || t.type == TokenType::kText)
      return TokenTypeName(t.type);
    return absl::StrCat("'", t.value, "'");
  }
  absl::Status Expect(TokenType type, const char* what) {
    if (current_ >= tokens_.size() || tokens_[current_].type != type) {
      return Error(absl::StrCat("expected ", what, ", got ", Describe()));
    }
    ++current_;
    return absl::OkStatus();
  }
  bool Is(TokenType type) const {
    return current_ < tokens_.size() && tokens_[current_].type == type;
  }
  bool IsIdentifier(const char* name) const {
    return Is(TokenType::kIdentifier) && tokens_[current_].value == name;
  }
  bool IsIdentifierPair(const char* a, const char* b) const {
    return IsIdentifier(a) && current_ + 1 < tokens_.size() &&
           tokens_[current_ + 1].type == TokenType::kIdentifier &&
           tokens_[current_ + 1].value == b;
  }
  bool IsStatement(std::initializer_list<const char*> names) const {
    if (!Is(TokenType::kOpenStatement) || current_ + 1 >= tokens_.size())
      return false;
    const Token& t = tokens_[current_ + 1];
    if (t.type != TokenType::kIdentifier) return false;
    for (const char* n : names) {
      if (t.value == n) return true;
    }
    return false;
  }
  absl::Status ExpectIdentifier(const char* name) {
    if (!IsIdentifier(name)) {
      return Error(absl::StrCat("expected '", name, "', got ", Describe()));
    }
    ++current_;
    return absl::OkStatus();
  }
  // Parses statements into `out` until one of `ends` opens; an unclosed
  // block is reported at its opening tag.
  absl::Status ParseUntil(std::initializer_list<const char*> ends,
                          std::vector<NodePtr>* out, const char* block,
                          SourcePos open) {
    while (!IsStatement(ends)) {
      if (current_ >= tokens_.size()) {
        return TemplateError(
            open, absl::StrCat("unclosed '", block, "' block: expected {% ",
                               *ends.begin() == std::string("elif")
                                   ? "endif"
                                   : *(ends.end() - 1),
                               " %}"));
      }
      QUANT_ASSIGN_OR_RETURN(NodePtr statement, ParseAny());
      out->push_back(std::move(statement));
    }
    return absl::OkStatus();
  }
  absl::Status ExpectEnd(const char* end) {
    QUANT_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "'{%'"));
    QUANT_RETURN_IF_ERROR(ExpectIdentifier(end));
    return Expect(TokenType::kCloseStatement, "'%}'");
  }

  NodePtr Make(NodeKind kind, SourcePos pos) {
    return std::make_unique<Node>(kind, pos);
  }

  absl::StatusOr<NodePtr> ParseAny();
  absl::StatusOr<NodePtr> ParseStatement();
  absl::StatusOr<NodePtr> ParseCallBlock(SourcePos pos);
  absl::StatusOr<NodePtr> ParseFilterBlock(SourcePos pos);
  absl::StatusOr<NodePtr> ParseSet(SourcePos pos);
  absl::StatusOr<NodePtr> ParseIf(SourcePos pos);
  absl::StatusOr<NodePtr> ParseMacro(SourcePos pos);
  absl::StatusOr<NodePtr> ParseFor(SourcePos pos);
  absl::StatusOr<NodePtr> ParseExpressionSequence(bool primary);
  absl::StatusOr<NodePtr> ParseExpression();
  absl::StatusOr<NodePtr> ParseIfExpression();
  absl::StatusOr<NodePtr> ParseOr();
  absl::StatusOr<NodePtr> ParseAnd();
  absl::StatusOr<NodePtr> ParseNot();
  absl::StatusOr<NodePtr> ParseComparison();
  absl::StatusOr<NodePtr> ParseAdditive();
  absl::StatusOr<NodePtr> ParseMultiplicative();
  absl::StatusOr<NodePtr> ParsePower();
  absl::StatusOr<NodePtr> ParseTest();
  absl::StatusOr<NodePtr> ParseFilter();
  absl::StatusOr<NodePtr> ParseUnarySign();
  absl::StatusOr<NodePtr> ParseCallMember();
  absl::StatusOr<NodePtr> ParseCall(NodePtr callee);
  absl::StatusOr<std::vector<NodePtr>> ParseArgs(bool parameters);
  absl::StatusOr<NodePtr> ParseMember(NodePtr object);
  absl::StatusOr<NodePtr> ParseSubscript();
  absl::StatusOr<NodePtr> ParsePrimary();
  absl::StatusOr<NodePtr> ParseBinaryChain(
      TokenType type, absl::StatusOr<NodePtr> (Parser::*operand)());

  const std::vector<Token>& tokens_;
  size_t current_ = 0;
  int depth_ = 0;
};

absl::StatusOr<NodePtr> Parser::ParseAny() {
  DepthGuard guard(this);
  QUANT_RETURN_IF_ERROR(guard.Check(PosHere()));
  const Token& t = tokens_[current_];
  switch (t.type) {
    case TokenType::kComment: {
      ++current_;
      return Make(NodeKind::kComment, t.pos);
    }
    case TokenType::kText: {
      ++current_;
      NodePtr n = Make(NodeKind::kText, t.pos);
      n->text = t.value;
      return n;
    }
    case TokenType::kOpenStatement:
      return ParseStatement();
    case TokenType::kOpenExpression: {
      ++current_;
      QUANT_ASSIGN_OR_RETURN(NodePtr e, ParseExpression());
      QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseExpression, "'}}'"));
      return e;
    }
    default:
      return Error(absl::StrCat("unexpected ", Describe()));
  }
}

absl::StatusOr<NodePtr> Parser::ParseStatement() {
  SourcePos open = PosHere();
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "'{%'"));
  if (!Is(TokenType::kIdentifier)) {
    return Error(absl::StrCat("expected a statement name, got ", Describe()));
  }
  std::string name = tokens_[current_].value;
  SourcePos name_pos = PosHere();
  ++current_;
  if (name == "set") return ParseSet(open);
  if (name == "if" || name == "macro" || name == "for") {
    absl::StatusOr<NodePtr> n = name == "if"      ? ParseIf(open)
                                : name == "macro" ? ParseMacro(open)
                                                  : ParseFor(open);
    if (!n.ok()) return n;
    QUANT_RETURN_IF_ERROR(ExpectEnd(name == "if"      ? "endif"
                                    : name == "macro" ? "endmacro"
                                                      : "endfor"));
    return n;
  }
  if (name == "call") return ParseCallBlock(open);
  if (name == "break" || name == "continue") {
    QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    return Make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, open);
  }
  if (name == "filter") return ParseFilterBlock(open);
  return TemplateError(
      name_pos, absl::StrCat("unknown or unsupported statement '", name, "'"));
}

absl::StatusOr<NodePtr> Parser::ParseCallBlock(SourcePos pos) {
  NodePtr n = Make(NodeKind::kCallBlock, pos);
  if (Is(TokenType::kOpenParen)) {
    QUANT_ASSIGN_OR_RETURN(n->args, ParseArgs(true));
  }
  QUANT_ASSIGN_OR_RETURN(NodePtr callee, ParsePrimary());
  if (callee->kind != NodeKind::kIdentifier) {
    return TemplateError(callee->pos, "expected a macro name after 'call'");
  }
  NodePtr call = Make(NodeKind::kCall, callee->pos);
  call->a = std::move(callee);
  QUANT_ASSIGN_OR_RETURN(call->args, ParseArgs(false));
  n->a = std::move(call);
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
  QUANT_RETURN_IF_ERROR(ParseUntil({"endcall"}, &n->body, "call", pos));
  QUANT_RETURN_IF_ERROR(ExpectEnd("endcall"));
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseFilterBlock(SourcePos pos) {
  NodePtr n = Make(NodeKind::kFilterBlock, pos);
  QUANT_ASSIGN_OR_RETURN(NodePtr filter, ParsePrimary());
  if (filter->kind == NodeKind::kIdentifier && Is(TokenType::kOpenParen)) {
    QUANT_ASSIGN_OR_RETURN(filter, ParseCall(std::move(filter)));
  }
  n->a = std::move(filter);
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
  QUANT_RETURN_IF_ERROR(ParseUntil({"endfilter"}, &n->body, "filter", pos));
  QUANT_RETURN_IF_ERROR(ExpectEnd("endfilter"));
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseSet(SourcePos pos) {
  NodePtr n = Make(NodeKind::kSet, pos);
  QUANT_ASSIGN_OR_RETURN(n->a, ParseExpressionSequence(false));
  if (Is(TokenType::kEquals)) {
    ++current_;
    QUANT_ASSIGN_OR_RETURN(n->b, ParseExpressionSequence(false));
  } else {
    QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'=' or '%}'"));
    QUANT_RETURN_IF_ERROR(ParseUntil({"endset"}, &n->body, "set", pos));
    QUANT_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "'{%'"));
    QUANT_RETURN_IF_ERROR(ExpectIdentifier("endset"));
  }
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseIf(SourcePos pos) {
  DepthGuard guard(this);
  QUANT_RETURN_IF_ERROR(guard.Check(pos));
  NodePtr n = Make(NodeKind::kIf, pos);
  QUANT_ASSIGN_OR_RETURN(n->a, ParseExpression());
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
  QUANT_RETURN_IF_ERROR(
      ParseUntil({"elif", "else", "endif"}, &n->body, "if", pos));
  if (IsStatement({"elif"})) {
    SourcePos elif_pos = PosHere();
    current_ += 2;
    QUANT_ASSIGN_OR_RETURN(NodePtr elif, ParseIf(elif_pos));
    n->alternate.push_back(std::move(elif));
  } else if (IsStatement({"else"})) {
    current_ += 2;
    QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    QUANT_RETURN_IF_ERROR(ParseUntil({"endif"}, &n->alternate, "if", pos));
  }
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseMacro(SourcePos pos) {
  NodePtr n = Make(NodeKind::kMacro, pos);
  QUANT_ASSIGN_OR_RETURN(NodePtr name, ParsePrimary());
  if (name->kind != NodeKind::kIdentifier) {
    return TemplateError(name->pos, "expected a macro name");
  }
  n->text = name->text;
  QUANT_ASSIGN_OR_RETURN(n->args, ParseArgs(true));
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
  QUANT_RETURN_IF_ERROR(ParseUntil({"endmacro"}, &n->body, "macro", pos));
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseFor(SourcePos pos) {
  NodePtr n = Make(NodeKind::kFor, pos);
  QUANT_ASSIGN_OR_RETURN(n->a, ParseExpressionSequence(true));
  if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTuple) {
    return TemplateError(n->a->pos,
                         "expected a name or names for the loop variable");
  }
  if (!IsIdentifier("in")) {
    return Error("expected 'in' after the loop variable");
  }
  ++current_;
  QUANT_ASSIGN_OR_RETURN(NodePtr iterable, ParseExpression());
  if (iterable->kind == NodeKind::kSelect) {
    n->b = std::move(iterable->a);
    n->c = std::move(iterable->b);
  } else {
    n->b = std::move(iterable);
  }
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
  QUANT_RETURN_IF_ERROR(ParseUntil({"else", "endfor"}, &n->body, "for", pos));
  if (IsStatement({"else"})) {
    current_ += 2;
    QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "'%}'"));
    QUANT_RETURN_IF_ERROR(ParseUntil({"endfor"}, &n->alternate, "for", pos));
  }
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseExpressionSequence(bool primary) {
  SourcePos pos = PosHere();
  QUANT_ASSIGN_OR_RETURN(NodePtr first,
                         primary ? ParsePrimary() : ParseExpression());
  if (!Is(TokenType::kComma)) return first;
  NodePtr tuple = Make(NodeKind::kTuple, pos);
  tuple->args.push_back(std::move(first));
  while (Is(TokenType::kComma)) {
    ++current_;
    QUANT_ASSIGN_OR_RETURN(NodePtr item,
                           primary ? ParsePrimary() : ParseExpression());
    tuple->args.push_back(std::move(item));
  }
  return tuple;
}

absl::StatusOr<NodePtr> Parser::ParseExpression() {
  DepthGuard guard(this);
  QUANT_RETURN_IF_ERROR(guard.Check(PosHere()));
  return ParseIfExpression();
}

absl::StatusOr<NodePtr> Parser::ParseIfExpression() {
  QUANT_ASSIGN_OR_RETURN(NodePtr a, ParseOr());
  if (!IsIdentifier("if")) return a;
  SourcePos pos = PosHere();
  ++current_;
  QUANT_ASSIGN_OR_RETURN(NodePtr test, ParseOr());
  if (IsIdentifier("else")) {
    ++current_;
    NodePtr n = Make(NodeKind::kTernary, pos);
    n->a = std::move(test);
    n->b = std::move(a);
    QUANT_ASSIGN_OR_RETURN(n->c, ParseIfExpression());
    return n;
  }
  NodePtr n = Make(NodeKind::kSelect, pos);
  n->a = std::move(a);
  n->b = std::move(test);
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseOr() {
  QUANT_ASSIGN_OR_RETURN(NodePtr left, ParseAnd());
  ChainGuard chain(this);
  while (IsIdentifier("or")) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    ++current_;
    n->text = "or";
    n->a = std::move(left);
    QUANT_ASSIGN_OR_RETURN(n->b, ParseAnd());
    left = std::move(n);
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseAnd() {
  QUANT_ASSIGN_OR_RETURN(NodePtr left, ParseNot());
  ChainGuard chain(this);
  while (IsIdentifier("and")) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    ++current_;
    n->text = "and";
    n->a = std::move(left);
    QUANT_ASSIGN_OR_RETURN(n->b, ParseNot());
    left = std::move(n);
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseNot() {
  if (IsIdentifier("not")) {
    DepthGuard guard(this);
    QUANT_RETURN_IF_ERROR(guard.Check(PosHere()));
    NodePtr n = Make(NodeKind::kUnary, PosHere());
    ++current_;
    n->text = "not";
    QUANT_ASSIGN_OR_RETURN(n->a, ParseNot());
    return n;
  }
  return ParseComparison();
}

absl::StatusOr<NodePtr> Parser::ParseComparison() {
  QUANT_ASSIGN_OR_RETURN(NodePtr left, ParseAdditive());
  ChainGuard chain(this);
  while (true) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    SourcePos pos = PosHere();
    std::string op;
    if (IsIdentifierPair("not", "in")) {
      op = "not in";
      current_ += 2;
    } else if (IsIdentifier("in")) {
      op = "in";
      ++current_;
    } else if (Is(TokenType::kComparisonOperator)) {
      op = tokens_[current_++].value;
    } else {
      break;
    }
    NodePtr n = Make(NodeKind::kBinary, pos);
    n->text = op;
    n->a = std::move(left);
    QUANT_ASSIGN_OR_RETURN(n->b, ParseAdditive());
    left = std::move(n);
  }
  return left;
}

// Left-associative `operand (op operand)*` for the operator token `type`.
absl::StatusOr<NodePtr> Parser::ParseBinaryChain(
    TokenType type, absl::StatusOr<NodePtr> (Parser::*operand)()) {
  QUANT_ASSIGN_OR_RETURN(NodePtr left, (this->*operand)());
  ChainGuard chain(this);
  while (Is(type)) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    n->text = tokens_[current_++].value;
    n->a = std::move(left);
    QUANT_ASSIGN_OR_RETURN(n->b, (this->*operand)());
    left = std::move(n);
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseAdditive() {
  return ParseBinaryChain(TokenType::kAdditiveOperator,
                          &Parser::ParseMultiplicative);
}

absl::StatusOr<NodePtr> Parser::ParseMultiplicative() {
  return ParseBinaryChain(TokenType::kMultiplicativeOperator,
                          &Parser::ParsePower);
}

absl::StatusOr<NodePtr> Parser::ParsePower() {
  return ParseBinaryChain(TokenType::kExponentiationOperator,
                          &Parser::ParseTest);
}

absl::StatusOr<NodePtr> Parser::ParseTest() {
  QUANT_ASSIGN_OR_RETURN(NodePtr operand, ParseFilter());
  ChainGuard chain(this);
  while (IsIdentifier("is")) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    ++current_;
    bool negate = IsIdentifier("not");
    if (negate) ++current_;
    SourcePos pos = PosHere();
    QUANT_ASSIGN_OR_RETURN(NodePtr test, ParsePrimary());
    if (test->kind != NodeKind::kIdentifier) {
      return TemplateError(test->pos, "expected a test name after 'is'");
    }
    NodePtr n = Make(NodeKind::kTest, pos);
    n->a = std::move(operand);
    n->text = test->text;
    n->negate = negate;
    operand = std::move(n);
  }
  return operand;
}

absl::StatusOr<NodePtr> Parser::ParseFilter() {
  QUANT_ASSIGN_OR_RETURN(NodePtr operand, ParseUnarySign());
  ChainGuard chain(this);
  while (Is(TokenType::kPipe)) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    ++current_;
    SourcePos pos = PosHere();
    QUANT_ASSIGN_OR_RETURN(NodePtr filter, ParsePrimary());
    if (filter->kind != NodeKind::kIdentifier) {
      return TemplateError(filter->pos, "expected a filter name after '|'");
    }
    if (Is(TokenType::kOpenParen)) {
      QUANT_ASSIGN_OR_RETURN(filter, ParseCall(std::move(filter)));
    }
    NodePtr n = Make(NodeKind::kFilter, pos);
    n->a = std::move(operand);
    n->b = std::move(filter);
    operand = std::move(n);
  }
  return operand;
}

absl::StatusOr<NodePtr> Parser::ParseUnarySign() {
  if ((Is(TokenType::kUnaryOperator) || Is(TokenType::kAdditiveOperator)) &&
      (tokens_[current_].value == "-" || tokens_[current_].value == "+")) {
    DepthGuard guard(this);
    QUANT_RETURN_IF_ERROR(guard.Check(PosHere()));
    NodePtr n = Make(NodeKind::kUnary, PosHere());
    n->text = tokens_[current_++].value;
    QUANT_ASSIGN_OR_RETURN(n->a, ParseUnarySign());
    return n;
  }
  return ParseCallMember();
}

absl::StatusOr<NodePtr> Parser::ParseCallMember() {
  QUANT_ASSIGN_OR_RETURN(NodePtr primary, ParsePrimary());
  QUANT_ASSIGN_OR_RETURN(NodePtr member, ParseMember(std::move(primary)));
  if (Is(TokenType::kOpenParen)) return ParseCall(std::move(member));
  return member;
}

absl::StatusOr<NodePtr> Parser::ParseCall(NodePtr callee) {
  DepthGuard guard(this);
  QUANT_RETURN_IF_ERROR(guard.Check(PosHere()));
  NodePtr n = Make(NodeKind::kCall, callee->pos);
  n->a = std::move(callee);
  QUANT_ASSIGN_OR_RETURN(n->args, ParseArgs(false));
  QUANT_ASSIGN_OR_RETURN(NodePtr expression, ParseMember(std::move(n)));
  if (Is(TokenType::kOpenParen)) return ParseCall(std::move(expression));
  return expression;
}

absl::StatusOr<std::vector<NodePtr>> Parser::ParseArgs(bool parameters) {
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kOpenParen, "'('"));
  std::vector<NodePtr> args;
  bool saw_keyword = false;
  bool saw_spread = false;
  while (!Is(TokenType::kCloseParen)) {
    if (current_ >= tokens_.size()) return Error("expected ')'");
    SourcePos pos = PosHere();
    bool keyword_spread = Is(TokenType::kExponentiationOperator);
    bool spread = Is(TokenType::kMultiplicativeOperator) &&
                  tokens_[current_].value == "*";
    if (parameters && (keyword_spread || spread)) {
      return Error("argument unpacking is not allowed in parameters");
    }
    if (keyword_spread) {
      ++current_;
      NodePtr n = Make(NodeKind::kKeywordSpread, pos);
      QUANT_ASSIGN_OR_RETURN(n->a, ParseExpression());
      args.push_back(std::move(n));
      if (Is(TokenType::kComma)) ++current_;
      if (!Is(TokenType::kCloseParen)) {
        return Error("'**' must be the last argument");
      }
      break;
    }
    NodePtr argument;
    if (spread) {
      if (saw_spread) return Error("only one '*' argument is allowed");
      saw_spread = true;
      ++current_;
      argument = Make(NodeKind::kSpread, pos);
      QUANT_ASSIGN_OR_RETURN(argument->a, ParseExpression());
    } else {
      QUANT_ASSIGN_OR_RETURN(argument, ParseExpression());
      if (Is(TokenType::kEquals)) {
        ++current_;
        if (argument->kind != NodeKind::kIdentifier) {
          return TemplateError(argument->pos, "expected a name before '='");
        }
        NodePtr kw = Make(NodeKind::kKeywordArg, argument->pos);
        kw->text = argument->text;
        QUANT_ASSIGN_OR_RETURN(kw->a, ParseExpression());
        argument = std::move(kw);
      }
      if (parameters && argument->kind != NodeKind::kIdentifier &&
          argument->kind != NodeKind::kKeywordArg) {
        return TemplateError(argument->pos, "expected a parameter name");
      }
      if (argument->kind == NodeKind::kKeywordArg) {
        saw_keyword = true;
      } else if (saw_keyword) {
        return TemplateError(
            argument->pos,
            parameters ? "non-default parameter follows default parameter"
                       : "positional argument follows keyword argument");
      }
    }
    args.push_back(std::move(argument));
    if (Is(TokenType::kComma)) ++current_;
  }
  QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseParen, "')'"));
  return args;
}

absl::StatusOr<NodePtr> Parser::ParseSubscript() {
  SourcePos pos = PosHere();
  std::vector<NodePtr> parts;
  bool is_slice = false;
  while (!Is(TokenType::kCloseSquareBracket)) {
    if (current_ >= tokens_.size()) return Error("expected ']'");
    if (Is(TokenType::kColon)) {
      parts.push_back(nullptr);
      ++current_;
      is_slice = true;
    } else {
      QUANT_ASSIGN_OR_RETURN(NodePtr part, ParseExpression());
      parts.push_back(std::move(part));
      if (Is(TokenType::kColon)) {
        ++current_;
        is_slice = true;
      }
    }
  }
  if (parts.empty()) return TemplateError(pos, "empty subscript");
  if (!is_slice) return std::move(parts[0]);
  if (parts.size() > 3) {
    return TemplateError(pos, "a slice takes at most 3 parts");
  }
  NodePtr n = Make(NodeKind::kSlice, pos);
  n->a = std::move(parts[0]);
  if (parts.size() > 1) n->b = std::move(parts[1]);
  if (parts.size() > 2) n->c = std::move(parts[2]);
  return n;
}

absl::StatusOr<NodePtr> Parser::ParseMember(NodePtr object) {
  ChainGuard chain(this);
  while (Is(TokenType::kDot) || Is(TokenType::kOpenSquareBracket)) {
    QUANT_RETURN_IF_ERROR(chain.Link(PosHere()));
    bool computed = Is(TokenType::kOpenSquareBracket);
    SourcePos pos = PosHere();
    ++current_;
    NodePtr n = Make(NodeKind::kMember, pos);
    n->computed = computed;
    if (computed) {
      QUANT_ASSIGN_OR_RETURN(n->b, ParseSubscript());
      QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseSquareBracket, "']'"));
    } else {
      QUANT_ASSIGN_OR_RETURN(n->b, ParsePrimary());
      if (n->b->kind != NodeKind::kIdentifier &&
          n->b->kind != NodeKind::kInteger) {
        return TemplateError(n->b->pos, "expected a name after '.'");
      }
    }
    n->a = std::move(object);
    object = std::move(n);
  }
  return object;
}

absl::StatusOr<NodePtr> Parser::ParsePrimary() {
  DepthGuard guard(this);
  QUANT_RETURN_IF_ERROR(guard.Check(PosHere()));
  if (current_ >= tokens_.size()) return Error("unexpected end of template");
  const Token& t = tokens_[current_++];
  switch (t.type) {
    case TokenType::kNumericLiteral: {
      if (t.value.find('.') != std::string::npos) {
        NodePtr n = Make(NodeKind::kFloat, t.pos);
        n->number = std::strtod(t.value.c_str(), nullptr);
        return n;
      }
      NodePtr n = Make(NodeKind::kInteger, t.pos);
      n->integer = std::strtoll(t.value.c_str(), nullptr, 10);
      return n;
    }
    case TokenType::kStringLiteral: {
      NodePtr n = Make(NodeKind::kString, t.pos);
      n->text = t.value;
      while (Is(TokenType::kStringLiteral))
        n->text += tokens_[current_++].value;
      return n;
    }
    case TokenType::kIdentifier: {
      NodePtr n = Make(NodeKind::kIdentifier, t.pos);
      n->text = t.value;
      return n;
    }
    case TokenType::kOpenParen: {
      QUANT_ASSIGN_OR_RETURN(NodePtr e, ParseExpressionSequence(false));
      QUANT_RETURN_IF_ERROR(Expect(TokenType::kCloseParen, "')'"));
      return e;
    }
    case TokenType::kOpenSquareBracket: {
      NodePtr n = Make(NodeKind::kList, t.pos);
      while (!Is(TokenType::kCloseSquareBracket)) {
        if (current_ >= tokens_.size()) return Error("expected ']'");
        QUANT_ASSIGN_OR_RETURN(NodePtr item, ParseExpression());
        n->args.push_back(std::move(item));
        if (Is(TokenType::kComma)) ++current_;
      }
      ++current_;
      return n;
    }
    case TokenType::kOpenCurlyBracket: {
      NodePtr n = Make(NodeKind::kDict, t.pos);
      while (!Is(TokenType::kCloseCurlyBracket)) {
        if (current_ >= tokens_.size()) return Error("expected '}'");
        QUANT_ASSIGN_OR_RETURN(NodePtr key, ParseExpression());
        n->args.push_back(std::move(key));
        QUANT_RETURN_IF_ERROR(Expect(TokenType::kColon, "':'"));
        QUANT_ASSIGN_OR_RETURN(NodePtr value, ParseExpression());
        n->args.push_back(std::move(value));
        if (Is(TokenType::kComma)) ++current_;
      }
      ++current_;
      return n;
    }
    default:
      --current_;
      return Error(absl::StrCat("unexpected ", Describe()));
  }
}

}  // namespace

absl::StatusOr<std::vector<NodePtr>> Parse(const std::vector<Token>& tokens) {
  Parser parser(tokens);
  return parser.Run();
}

}  // namespace quant::jinja
