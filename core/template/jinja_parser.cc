// Parser of the Jinja engine; see jinja_parser.h.
#include "core/template/jinja_parser.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace quant::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  std::vector<NodePtr> Run() {
    std::vector<NodePtr> program;
    while (current_ < tokens_.size()) program.push_back(ParseAny());
    return program;
  }

 private:
  // Guards the recursion depth.
  class DepthGuard {
   public:
    DepthGuard(Parser* p, SourcePos pos) : p_(p) {
      if (++p_->depth_ > kMaxParseDepth) {
        throw JinjaError(pos,
                         absl::StrCat("template nesting deeper than ",
                                      kMaxParseDepth, " levels"),
                         false, true);
      }
    }
    ~DepthGuard() { --p_->depth_; }

   private:
    Parser* p_;
  };

  SourcePos PosHere() const {
    if (current_ < tokens_.size()) return tokens_[current_].pos;
    return tokens_.empty() ? SourcePos{1, 1} : tokens_.back().pos;
  }
  [[noreturn]] void Fail(const std::string& message) const {
    throw JinjaError(PosHere(), message);
  }
  [[noreturn]] void FailAt(SourcePos pos, const std::string& message) const {
    throw JinjaError(pos, message);
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
  const Token& Expect(TokenType type, const char* what) {
    if (current_ >= tokens_.size() || tokens_[current_].type != type) {
      Fail(absl::StrCat("expected ", what, ", got ", Describe()));
    }
    return tokens_[current_++];
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
  void ExpectIdentifier(const char* name) {
    if (!IsIdentifier(name)) {
      Fail(absl::StrCat("expected '", name, "', got ", Describe()));
    }
    ++current_;
  }
  // Parses statements into `out` until one of `ends` opens; an unclosed
  // block is reported at its opening tag.
  void ParseUntil(std::initializer_list<const char*> ends,
                  std::vector<NodePtr>* out, const char* block,
                  SourcePos open) {
    while (!IsStatement(ends)) {
      if (current_ >= tokens_.size()) {
        FailAt(open, absl::StrCat("unclosed '", block, "' block: expected {% ",
                                  *ends.begin() == std::string("elif")
                                      ? "endif"
                                      : *(ends.end() - 1),
                                  " %}"));
      }
      out->push_back(ParseAny());
    }
  }
  void ExpectEnd(const char* end) {
    Expect(TokenType::kOpenStatement, "'{%'");
    ExpectIdentifier(end);
    Expect(TokenType::kCloseStatement, "'%}'");
  }

  NodePtr Make(NodeKind kind, SourcePos pos) {
    return std::make_unique<Node>(kind, pos);
  }

  NodePtr ParseAny();
  NodePtr ParseStatement();
  NodePtr ParseSet(SourcePos pos);
  NodePtr ParseIf(SourcePos pos);
  NodePtr ParseMacro(SourcePos pos);
  NodePtr ParseFor(SourcePos pos);
  NodePtr ParseExpressionSequence(bool primary);
  NodePtr ParseExpression();
  NodePtr ParseIfExpression();
  NodePtr ParseOr();
  NodePtr ParseAnd();
  NodePtr ParseNot();
  NodePtr ParseComparison();
  NodePtr ParseAdditive();
  NodePtr ParseMultiplicative();
  NodePtr ParsePower();
  NodePtr ParseTest();
  NodePtr ParseFilter();
  NodePtr ParseUnarySign();
  NodePtr ParseCallMember();
  NodePtr ParseCall(NodePtr callee);
  std::vector<NodePtr> ParseArgs(bool parameters);
  NodePtr ParseMember(NodePtr object);
  NodePtr ParseSubscript();
  NodePtr ParsePrimary();

  const std::vector<Token>& tokens_;
  size_t current_ = 0;
  int depth_ = 0;
};

NodePtr Parser::ParseAny() {
  DepthGuard guard(this, PosHere());
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
      NodePtr e = ParseExpression();
      Expect(TokenType::kCloseExpression, "'}}'");
      return e;
    }
    default:
      Fail(absl::StrCat("unexpected ", Describe()));
  }
}

NodePtr Parser::ParseStatement() {
  SourcePos open = PosHere();
  Expect(TokenType::kOpenStatement, "'{%'");
  if (!Is(TokenType::kIdentifier)) {
    Fail(absl::StrCat("expected a statement name, got ", Describe()));
  }
  std::string name = tokens_[current_].value;
  SourcePos name_pos = PosHere();
  ++current_;
  if (name == "set") return ParseSet(open);
  if (name == "if") {
    NodePtr n = ParseIf(open);
    ExpectEnd("endif");
    return n;
  }
  if (name == "macro") {
    NodePtr n = ParseMacro(open);
    ExpectEnd("endmacro");
    return n;
  }
  if (name == "for") {
    NodePtr n = ParseFor(open);
    ExpectEnd("endfor");
    return n;
  }
  if (name == "call") {
    NodePtr n = Make(NodeKind::kCallBlock, open);
    if (Is(TokenType::kOpenParen)) n->args = ParseArgs(true);
    NodePtr callee = ParsePrimary();
    if (callee->kind != NodeKind::kIdentifier) {
      FailAt(callee->pos, "expected a macro name after 'call'");
    }
    NodePtr call = Make(NodeKind::kCall, callee->pos);
    call->a = std::move(callee);
    call->args = ParseArgs(false);
    n->a = std::move(call);
    Expect(TokenType::kCloseStatement, "'%}'");
    ParseUntil({"endcall"}, &n->body, "call", open);
    ExpectEnd("endcall");
    return n;
  }
  if (name == "break" || name == "continue") {
    Expect(TokenType::kCloseStatement, "'%}'");
    return Make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, open);
  }
  if (name == "filter") {
    NodePtr n = Make(NodeKind::kFilterBlock, open);
    NodePtr filter = ParsePrimary();
    if (filter->kind == NodeKind::kIdentifier && Is(TokenType::kOpenParen)) {
      filter = ParseCall(std::move(filter));
    }
    n->a = std::move(filter);
    Expect(TokenType::kCloseStatement, "'%}'");
    ParseUntil({"endfilter"}, &n->body, "filter", open);
    ExpectEnd("endfilter");
    return n;
  }
  FailAt(name_pos,
         absl::StrCat("unknown or unsupported statement '", name, "'"));
}

NodePtr Parser::ParseSet(SourcePos pos) {
  NodePtr n = Make(NodeKind::kSet, pos);
  n->a = ParseExpressionSequence(false);
  if (Is(TokenType::kEquals)) {
    ++current_;
    n->b = ParseExpressionSequence(false);
  } else {
    Expect(TokenType::kCloseStatement, "'=' or '%}'");
    ParseUntil({"endset"}, &n->body, "set", pos);
    Expect(TokenType::kOpenStatement, "'{%'");
    ExpectIdentifier("endset");
  }
  Expect(TokenType::kCloseStatement, "'%}'");
  return n;
}

NodePtr Parser::ParseIf(SourcePos pos) {
  DepthGuard guard(this, pos);
  NodePtr n = Make(NodeKind::kIf, pos);
  n->a = ParseExpression();
  Expect(TokenType::kCloseStatement, "'%}'");
  ParseUntil({"elif", "else", "endif"}, &n->body, "if", pos);
  if (IsStatement({"elif"})) {
    SourcePos elif_pos = PosHere();
    current_ += 2;
    n->alternate.push_back(ParseIf(elif_pos));
  } else if (IsStatement({"else"})) {
    current_ += 2;
    Expect(TokenType::kCloseStatement, "'%}'");
    ParseUntil({"endif"}, &n->alternate, "if", pos);
  }
  return n;
}

NodePtr Parser::ParseMacro(SourcePos pos) {
  NodePtr n = Make(NodeKind::kMacro, pos);
  NodePtr name = ParsePrimary();
  if (name->kind != NodeKind::kIdentifier) {
    FailAt(name->pos, "expected a macro name");
  }
  n->text = name->text;
  n->args = ParseArgs(true);
  Expect(TokenType::kCloseStatement, "'%}'");
  ParseUntil({"endmacro"}, &n->body, "macro", pos);
  return n;
}

NodePtr Parser::ParseFor(SourcePos pos) {
  NodePtr n = Make(NodeKind::kFor, pos);
  n->a = ParseExpressionSequence(true);
  if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTuple) {
    FailAt(n->a->pos, "expected a name or names for the loop variable");
  }
  if (!IsIdentifier("in")) Fail("expected 'in' after the loop variable");
  ++current_;
  NodePtr iterable = ParseExpression();
  if (iterable->kind == NodeKind::kSelect) {
    n->b = std::move(iterable->a);
    n->c = std::move(iterable->b);
  } else {
    n->b = std::move(iterable);
  }
  Expect(TokenType::kCloseStatement, "'%}'");
  ParseUntil({"else", "endfor"}, &n->body, "for", pos);
  if (IsStatement({"else"})) {
    current_ += 2;
    Expect(TokenType::kCloseStatement, "'%}'");
    ParseUntil({"endfor"}, &n->alternate, "for", pos);
  }
  return n;
}

NodePtr Parser::ParseExpressionSequence(bool primary) {
  SourcePos pos = PosHere();
  NodePtr first = primary ? ParsePrimary() : ParseExpression();
  if (!Is(TokenType::kComma)) return first;
  NodePtr tuple = Make(NodeKind::kTuple, pos);
  tuple->args.push_back(std::move(first));
  while (Is(TokenType::kComma)) {
    ++current_;
    tuple->args.push_back(primary ? ParsePrimary() : ParseExpression());
  }
  return tuple;
}

NodePtr Parser::ParseExpression() {
  DepthGuard guard(this, PosHere());
  return ParseIfExpression();
}

NodePtr Parser::ParseIfExpression() {
  NodePtr a = ParseOr();
  if (!IsIdentifier("if")) return a;
  SourcePos pos = PosHere();
  ++current_;
  NodePtr test = ParseOr();
  if (IsIdentifier("else")) {
    ++current_;
    NodePtr n = Make(NodeKind::kTernary, pos);
    n->a = std::move(test);
    n->b = std::move(a);
    n->c = ParseIfExpression();
    return n;
  }
  NodePtr n = Make(NodeKind::kSelect, pos);
  n->a = std::move(a);
  n->b = std::move(test);
  return n;
}

NodePtr Parser::ParseOr() {
  NodePtr left = ParseAnd();
  while (IsIdentifier("or")) {
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    ++current_;
    n->text = "or";
    n->a = std::move(left);
    n->b = ParseAnd();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::ParseAnd() {
  NodePtr left = ParseNot();
  while (IsIdentifier("and")) {
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    ++current_;
    n->text = "and";
    n->a = std::move(left);
    n->b = ParseNot();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::ParseNot() {
  if (IsIdentifier("not")) {
    DepthGuard guard(this, PosHere());
    NodePtr n = Make(NodeKind::kUnary, PosHere());
    ++current_;
    n->text = "not";
    n->a = ParseNot();
    return n;
  }
  return ParseComparison();
}

NodePtr Parser::ParseComparison() {
  NodePtr left = ParseAdditive();
  while (true) {
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
    n->b = ParseAdditive();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::ParseAdditive() {
  NodePtr left = ParseMultiplicative();
  while (Is(TokenType::kAdditiveOperator)) {
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    n->text = tokens_[current_++].value;
    n->a = std::move(left);
    n->b = ParseMultiplicative();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::ParseMultiplicative() {
  NodePtr left = ParsePower();
  while (Is(TokenType::kMultiplicativeOperator)) {
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    n->text = tokens_[current_++].value;
    n->a = std::move(left);
    n->b = ParsePower();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::ParsePower() {
  NodePtr left = ParseTest();
  while (Is(TokenType::kExponentiationOperator)) {
    NodePtr n = Make(NodeKind::kBinary, PosHere());
    n->text = tokens_[current_++].value;
    n->a = std::move(left);
    n->b = ParseTest();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::ParseTest() {
  NodePtr operand = ParseFilter();
  while (IsIdentifier("is")) {
    ++current_;
    bool negate = IsIdentifier("not");
    if (negate) ++current_;
    SourcePos pos = PosHere();
    NodePtr test = ParsePrimary();
    if (test->kind != NodeKind::kIdentifier) {
      FailAt(test->pos, "expected a test name after 'is'");
    }
    NodePtr n = Make(NodeKind::kTest, pos);
    n->a = std::move(operand);
    n->text = test->text;
    n->negate = negate;
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::ParseFilter() {
  NodePtr operand = ParseUnarySign();
  while (Is(TokenType::kPipe)) {
    ++current_;
    SourcePos pos = PosHere();
    NodePtr filter = ParsePrimary();
    if (filter->kind != NodeKind::kIdentifier) {
      FailAt(filter->pos, "expected a filter name after '|'");
    }
    if (Is(TokenType::kOpenParen)) filter = ParseCall(std::move(filter));
    NodePtr n = Make(NodeKind::kFilter, pos);
    n->a = std::move(operand);
    n->b = std::move(filter);
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::ParseUnarySign() {
  if ((Is(TokenType::kUnaryOperator) || Is(TokenType::kAdditiveOperator)) &&
      (tokens_[current_].value == "-" || tokens_[current_].value == "+")) {
    DepthGuard guard(this, PosHere());
    NodePtr n = Make(NodeKind::kUnary, PosHere());
    n->text = tokens_[current_++].value;
    n->a = ParseUnarySign();
    return n;
  }
  return ParseCallMember();
}

NodePtr Parser::ParseCallMember() {
  NodePtr member = ParseMember(ParsePrimary());
  if (Is(TokenType::kOpenParen)) return ParseCall(std::move(member));
  return member;
}

NodePtr Parser::ParseCall(NodePtr callee) {
  DepthGuard guard(this, PosHere());
  NodePtr n = Make(NodeKind::kCall, callee->pos);
  n->a = std::move(callee);
  n->args = ParseArgs(false);
  NodePtr expression = ParseMember(std::move(n));
  if (Is(TokenType::kOpenParen)) return ParseCall(std::move(expression));
  return expression;
}

std::vector<NodePtr> Parser::ParseArgs(bool parameters) {
  Expect(TokenType::kOpenParen, "'('");
  std::vector<NodePtr> args;
  bool saw_keyword = false;
  bool saw_spread = false;
  while (!Is(TokenType::kCloseParen)) {
    if (current_ >= tokens_.size()) Fail("expected ')'");
    SourcePos pos = PosHere();
    bool keyword_spread = Is(TokenType::kExponentiationOperator);
    bool spread = Is(TokenType::kMultiplicativeOperator) &&
                  tokens_[current_].value == "*";
    if (parameters && (keyword_spread || spread)) {
      Fail("argument unpacking is not allowed in parameters");
    }
    if (keyword_spread) {
      ++current_;
      NodePtr n = Make(NodeKind::kKeywordSpread, pos);
      n->a = ParseExpression();
      args.push_back(std::move(n));
      if (Is(TokenType::kComma)) ++current_;
      if (!Is(TokenType::kCloseParen)) Fail("'**' must be the last argument");
      break;
    }
    NodePtr argument;
    if (spread) {
      if (saw_spread) Fail("only one '*' argument is allowed");
      saw_spread = true;
      ++current_;
      argument = Make(NodeKind::kSpread, pos);
      argument->a = ParseExpression();
    } else {
      argument = ParseExpression();
      if (Is(TokenType::kEquals)) {
        ++current_;
        if (argument->kind != NodeKind::kIdentifier) {
          FailAt(argument->pos, "expected a name before '='");
        }
        NodePtr kw = Make(NodeKind::kKeywordArg, argument->pos);
        kw->text = argument->text;
        kw->a = ParseExpression();
        argument = std::move(kw);
      }
      if (parameters && argument->kind != NodeKind::kIdentifier &&
          argument->kind != NodeKind::kKeywordArg) {
        FailAt(argument->pos, "expected a parameter name");
      }
      if (argument->kind == NodeKind::kKeywordArg) {
        saw_keyword = true;
      } else if (saw_keyword) {
        FailAt(argument->pos,
               parameters ? "non-default parameter follows default parameter"
                          : "positional argument follows keyword argument");
      }
    }
    args.push_back(std::move(argument));
    if (Is(TokenType::kComma)) ++current_;
  }
  Expect(TokenType::kCloseParen, "')'");
  return args;
}

NodePtr Parser::ParseSubscript() {
  SourcePos pos = PosHere();
  std::vector<NodePtr> parts;
  bool is_slice = false;
  while (!Is(TokenType::kCloseSquareBracket)) {
    if (current_ >= tokens_.size()) Fail("expected ']'");
    if (Is(TokenType::kColon)) {
      parts.push_back(nullptr);
      ++current_;
      is_slice = true;
    } else {
      parts.push_back(ParseExpression());
      if (Is(TokenType::kColon)) {
        ++current_;
        is_slice = true;
      }
    }
  }
  if (parts.empty()) FailAt(pos, "empty subscript");
  if (!is_slice) return std::move(parts[0]);
  if (parts.size() > 3) FailAt(pos, "a slice takes at most 3 parts");
  NodePtr n = Make(NodeKind::kSlice, pos);
  n->a = std::move(parts[0]);
  if (parts.size() > 1) n->b = std::move(parts[1]);
  if (parts.size() > 2) n->c = std::move(parts[2]);
  return n;
}

NodePtr Parser::ParseMember(NodePtr object) {
  while (Is(TokenType::kDot) || Is(TokenType::kOpenSquareBracket)) {
    bool computed = Is(TokenType::kOpenSquareBracket);
    SourcePos pos = PosHere();
    ++current_;
    NodePtr n = Make(NodeKind::kMember, pos);
    n->computed = computed;
    if (computed) {
      n->b = ParseSubscript();
      Expect(TokenType::kCloseSquareBracket, "']'");
    } else {
      n->b = ParsePrimary();
      if (n->b->kind != NodeKind::kIdentifier &&
          n->b->kind != NodeKind::kInteger) {
        FailAt(n->b->pos, "expected a name after '.'");
      }
    }
    n->a = std::move(object);
    object = std::move(n);
  }
  return object;
}

NodePtr Parser::ParsePrimary() {
  DepthGuard guard(this, PosHere());
  if (current_ >= tokens_.size()) Fail("unexpected end of template");
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
      NodePtr e = ParseExpressionSequence(false);
      Expect(TokenType::kCloseParen, "')'");
      return e;
    }
    case TokenType::kOpenSquareBracket: {
      NodePtr n = Make(NodeKind::kList, t.pos);
      while (!Is(TokenType::kCloseSquareBracket)) {
        if (current_ >= tokens_.size()) Fail("expected ']'");
        n->args.push_back(ParseExpression());
        if (Is(TokenType::kComma)) ++current_;
      }
      ++current_;
      return n;
    }
    case TokenType::kOpenCurlyBracket: {
      NodePtr n = Make(NodeKind::kDict, t.pos);
      while (!Is(TokenType::kCloseCurlyBracket)) {
        if (current_ >= tokens_.size()) Fail("expected '}'");
        n->args.push_back(ParseExpression());
        Expect(TokenType::kColon, "':'");
        n->args.push_back(ParseExpression());
        if (Is(TokenType::kComma)) ++current_;
      }
      ++current_;
      return n;
    }
    default:
      --current_;
      Fail(absl::StrCat("unexpected ", Describe()));
  }
}

}  // namespace

absl::StatusOr<std::vector<NodePtr>> Parse(const std::vector<Token>& tokens) {
  try {
    Parser parser(tokens);
    return parser.Run();
  } catch (const JinjaError& e) {
    return ErrorToStatus(e);
  }
}

}  // namespace quant::jinja
