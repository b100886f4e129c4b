// Tokenizer of the Jinja engine; see jinja_lexer.h. The rules follow the
// tokenizer of @huggingface/jinja so that whitespace handling and the
// handling of signs (unary vs binary) match it exactly.
#include "core/template/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"
#include "core/template/jinja_error.h"

namespace quant::jinja {

bool IsJsWhitespace(char32_t c) {
  if (c <= 32) return c == 32 || (c >= 9 && c <= 13);
  return c > 127 &&
         (c == 160 || c == 5760 || (c >= 8192 && c <= 8202) || c == 8232 ||
          c == 8233 || c == 8239 || c == 8287 || c == 12288 || c == 65279);
}

const char* TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kText:
      return "text";
    case TokenType::kNumericLiteral:
      return "number";
    case TokenType::kStringLiteral:
      return "string";
    case TokenType::kIdentifier:
      return "identifier";
    case TokenType::kEquals:
      return "'='";
    case TokenType::kOpenParen:
      return "'('";
    case TokenType::kCloseParen:
      return "')'";
    case TokenType::kOpenStatement:
      return "'{%'";
    case TokenType::kCloseStatement:
      return "'%}'";
    case TokenType::kOpenExpression:
      return "'{{'";
    case TokenType::kCloseExpression:
      return "'}}'";
    case TokenType::kOpenSquareBracket:
      return "'['";
    case TokenType::kCloseSquareBracket:
      return "']'";
    case TokenType::kOpenCurlyBracket:
      return "'{'";
    case TokenType::kCloseCurlyBracket:
      return "'}'";
    case TokenType::kComma:
      return "','";
    case TokenType::kDot:
      return "'.'";
    case TokenType::kColon:
      return "':'";
    case TokenType::kPipe:
      return "'|'";
    case TokenType::kAdditiveOperator:
    case TokenType::kMultiplicativeOperator:
    case TokenType::kExponentiationOperator:
    case TokenType::kComparisonOperator:
    case TokenType::kUnaryOperator:
      return "operator";
    case TokenType::kComment:
      return "comment";
  }
  return "?";
}

namespace {

// The preprocessed text and, per byte, its offset in the original source.
struct Mapped {
  std::string text;
  std::vector<size_t> origin;
  void Append(const Mapped& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    origin.insert(origin.end(), from.origin.begin() + begin,
                  from.origin.begin() + end);
  }
};

// Byte length of the JS whitespace character at `pos`, or 0.
size_t WhitespaceAt(absl::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return IsJsWhitespace(c) ? 1 : 0;
  size_t p = pos;
  char32_t cp = DecodeUtf8At(s, &p);
  return IsJsWhitespace(cp) ? p - pos : 0;
}

// Byte length of a JS line terminator at `pos` (\n, \r, U+2028, U+2029).
size_t LineTerminatorAt(absl::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  if (s[pos] == '\n' || s[pos] == '\r') return 1;
  if (s.substr(pos, 3) == "\xE2\x80\xA8" || s.substr(pos, 3) == "\xE2\x80\xA9")
    return 3;
  return 0;
}

Mapped Preprocess(absl::string_view source) {
  Mapped in;
  in.text = std::string(source);
  if (!in.text.empty() && in.text.back() == '\n') in.text.pop_back();
  in.origin.resize(in.text.size());
  for (size_t i = 0; i < in.origin.size(); ++i) in.origin[i] = i;

  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
  Mapped l;
  {
    const std::string& s = in.text;
    size_t i = 0;
    bool line_start = true;
    while (i < s.size()) {
      if (line_start) {
        size_t j = i;
        while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
        if (j + 1 < s.size() && s[j] == '{' &&
            (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
          i = j;
        }
        line_start = false;
        continue;
      }
      size_t term = LineTerminatorAt(s, i);
      if (term > 0) {
        l.Append(in, i, i + term);
        i += term;
        line_start = true;
        continue;
      }
      l.Append(in, i, i + 1);
      ++i;
    }
  }
  // trim_blocks: /([#%-]})\n/g -> "$1".
  Mapped t;
  {
    const std::string& s = l.text;
    size_t i = 0;
    while (i < s.size()) {
      if (i + 2 < s.size() + 0 && (s[i] == '#' || s[i] == '%' || s[i] == '-') &&
          s[i + 1] == '}' && s[i + 2] == '\n') {
        t.Append(l, i, i + 2);
        i += 3;
        continue;
      }
      t.Append(l, i, i + 1);
      ++i;
    }
  }
  // /{%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs: the markers go.
  Mapped g;
  {
    const std::string& s = t.text;
    size_t last = 0;
    size_t i = 0;
    while ((i = s.find("{%", i)) != std::string::npos) {
      size_t p = i + 2;
      bool lstrip = false, rstrip = false;
      if (p < s.size() && s[p] == '-') {
        lstrip = true;
        ++p;
      }
      while (size_t w = WhitespaceAt(s, p)) p += w;
      if (s.compare(p, 3, "end") == 0 &&
          s.compare(p + 3, 10, "generation") == 0)
        p += 3;
      if (s.compare(p, 10, "generation") != 0) {
        i += 2;
        continue;
      }
      p += 10;
      while (size_t w = WhitespaceAt(s, p)) p += w;
      if (p < s.size() && s[p] == '-') {
        rstrip = true;
        ++p;
      }
      if (s.compare(p, 2, "%}") != 0) {
        i += 2;
        continue;
      }
      p += 2;
      size_t after_begin = p;
      while (size_t w = WhitespaceAt(s, p)) p += w;
      size_t end = i;
      if (lstrip) {
        // Strip whitespace (by JS code units) back to the last match.
        while (end > last) {
          size_t k = end - 1;
          while (k > last && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80)
            --k;
          if (WhitespaceAt(s, k) != end - k) break;
          end = k;
        }
      }
      g.Append(t, last, end);
      if (!rstrip) g.Append(t, after_begin, p);
      last = p;
      i = p;
    }
    g.Append(t, last, s.size());
  }
  return g;
}

class Lexer {
 public:
  explicit Lexer(absl::string_view source)
      : source_(source), mapped_(Preprocess(source)), src_(mapped_.text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run();

 private:
  SourcePos PosAt(size_t offset) const {
    size_t original = offset < mapped_.origin.size() ? mapped_.origin[offset]
                                                     : source_.size();
    auto it =
        std::upper_bound(line_starts_.begin(), line_starts_.end(), original);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    // Tokens come in source order: count on from the last position asked
    // for when it is earlier on the same line, so a template on one long
    // line costs linear time, not quadratic.
    size_t from = line_starts_[line - 1];
    SourcePos pos{static_cast<int>(line), 1};
    if (cached_.line == pos.line && cached_offset_ >= from &&
        cached_offset_ <= original) {
      from = cached_offset_;
      pos = cached_;
    }
    for (size_t i = from; i < original && i < source_.size(); ++i) {
      if ((static_cast<unsigned char>(source_[i]) & 0xC0) != 0x80) ++pos.column;
    }
    cached_offset_ = original;
    cached_ = pos;
    return pos;
  }
  absl::Status Error(size_t offset, absl::string_view message) const {
    return TemplateError(PosAt(offset), message);
  }
  void Push(TokenType type, std::string value, size_t offset) {
    tokens_.push_back(Token{type, std::move(value), PosAt(offset)});
  }
  char At(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }
  static bool IsWordChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  // Consumes characters while `pred` holds; reaching the end is an error.
  template <typename Pred>
  absl::StatusOr<std::string> ConsumeWhile(Pred pred) {
    size_t start = cursor_;
    while (true) {
      size_t n = pred(cursor_);
      if (n == 0) break;
      cursor_ += n;
      if (cursor_ >= src_.size()) {
        return Error(start, "unexpected end of template");
      }
    }
    return src_.substr(start, cursor_ - start);
  }
  absl::StatusOr<std::string> ConsumeDigits() {
    return ConsumeWhile(
        [this](size_t p) { return p < src_.size() && IsDigit(src_[p]); });
  }
  absl::StatusOr<std::string> ConsumeString(char quote, size_t open);
  void StripTrailingWhitespace();
  void SkipLeadingWhitespace() {
    while (size_t w = WhitespaceAt(src_, cursor_)) cursor_ += w;
  }

  absl::string_view source_;
  Mapped mapped_;
  const std::string& src_;
  size_t cursor_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
  std::vector<size_t> line_starts_;
  // The last position PosAt computed, and its offset in the source.
  mutable size_t cached_offset_ = 0;
  mutable SourcePos cached_{1, 1};
};

absl::StatusOr<std::string> Lexer::ConsumeString(char quote, size_t open) {
  std::string out;
  while (true) {
    if (cursor_ >= src_.size()) {
      return Error(open, "unterminated string literal");
    }
    char c = src_[cursor_];
    if (c == quote) break;
    ++cursor_;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (cursor_ >= src_.size()) {
      return Error(open, "unterminated string literal");
    }
    char escaped = src_[cursor_++];
    if (escaped == 'x' || escaped == 'u') {
      size_t len = escaped == 'x' ? 2 : 4;
      std::string hex = src_.substr(cursor_, len);
      bool ok = hex.size() == len;
      for (char h : hex)
        ok = ok && std::isxdigit(static_cast<unsigned char>(h));
      if (!ok) {
        return Error(cursor_ - 2, absl::StrCat("invalid hexadecimal escape \\",
                                               std::string(1, escaped), hex));
      }
      AppendUtf8(static_cast<char32_t>(std::strtoul(hex.c_str(), nullptr, 16)),
                 &out);
      cursor_ += len;
      continue;
    }
    switch (escaped) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\'':
      case '"':
      case '\\':
        out.push_back(escaped);
        break;
      default:
        return Error(cursor_ - 2, absl::StrCat("unexpected escaped character '",
                                               std::string(1, escaped), "'"));
    }
  }
  return out;
}

void Lexer::StripTrailingWhitespace() {
  if (tokens_.empty() || tokens_.back().type != TokenType::kText) return;
  std::string& text = tokens_.back().value;
  while (!text.empty()) {
    size_t k = text.size() - 1;
    while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
    if (WhitespaceAt(text, k) != text.size() - k) break;
    text.resize(k);
  }
  if (text.empty()) tokens_.pop_back();
}

absl::StatusOr<std::vector<Token>> Lexer::Run() {
  struct Rule {
    const char* seq;
    TokenType type;
  };
  static const Rule kRules[] = {
      {"{%", TokenType::kOpenStatement},
      {"%}", TokenType::kCloseStatement},
      {"{{", TokenType::kOpenExpression},
      {"}}", TokenType::kCloseExpression},
      {"(", TokenType::kOpenParen},
      {")", TokenType::kCloseParen},
      {"{", TokenType::kOpenCurlyBracket},
      {"}", TokenType::kCloseCurlyBracket},
      {"[", TokenType::kOpenSquareBracket},
      {"]", TokenType::kCloseSquareBracket},
      {",", TokenType::kComma},
      {".", TokenType::kDot},
      {":", TokenType::kColon},
      {"|", TokenType::kPipe},
      {"<=", TokenType::kComparisonOperator},
      {">=", TokenType::kComparisonOperator},
      {"==", TokenType::kComparisonOperator},
      {"!=", TokenType::kComparisonOperator},
      {"<", TokenType::kComparisonOperator},
      {">", TokenType::kComparisonOperator},
      {"+", TokenType::kAdditiveOperator},
      {"-", TokenType::kAdditiveOperator},
      {"~", TokenType::kAdditiveOperator},
      {"**", TokenType::kExponentiationOperator},
      {"*", TokenType::kMultiplicativeOperator},
      {"//", TokenType::kMultiplicativeOperator},
      {"/", TokenType::kMultiplicativeOperator},
      {"%", TokenType::kMultiplicativeOperator},
      {"=", TokenType::kEquals},
  };
  const size_t length = src_.size();
  while (cursor_ < length) {
    bool have_last = !tokens_.empty();
    TokenType last = have_last ? tokens_.back().type : TokenType::kText;
    if (!have_last || last == TokenType::kCloseStatement ||
        last == TokenType::kCloseExpression || last == TokenType::kComment) {
      size_t end = cursor_;
      while (true) {
        end = src_.find('{', end);
        if (end == std::string::npos) {
          end = length;
          break;
        }
        char next = At(end + 1);
        if (next == '%' || next == '{' || next == '#') break;
        ++end;
      }
      if (end > cursor_) {
        Push(TokenType::kText, src_.substr(cursor_, end - cursor_), cursor_);
        cursor_ = end;
        continue;
      }
    }
    if (src_[cursor_] == '{') {
      char next = At(cursor_ + 1);
      if (next == '#') {
        size_t open = cursor_;
        cursor_ += 2;
        bool strip_before = At(cursor_) == '-';
        if (strip_before) ++cursor_;
        size_t end = src_.find("#}", cursor_);
        if (end == std::string::npos) {
          return Error(open, "unclosed comment '{#'");
        }
        std::string comment = src_.substr(cursor_, end - cursor_);
        bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) StripTrailingWhitespace();
        Push(TokenType::kComment, comment, open);
        cursor_ = end + 2;
        if (strip_after) SkipLeadingWhitespace();
        continue;
      }
      if (At(cursor_ + 2) == '-') {
        if (next == '%') {
          StripTrailingWhitespace();
          Push(TokenType::kOpenStatement, "{%", cursor_);
          cursor_ += 3;
          continue;
        }
        if (next == '{') {
          StripTrailingWhitespace();
          Push(TokenType::kOpenExpression, "{{", cursor_);
          curly_depth_ = 0;
          cursor_ += 3;
          continue;
        }
      }
    }
    QUANT_RETURN_IF_ERROR(ConsumeWhile([this](size_t p) {
                            return WhitespaceAt(src_, p);
                          }).status());
    char c = src_[cursor_];
    if (c == '-' && At(cursor_ + 2) == '}') {
      char next = At(cursor_ + 1);
      if (next == '%') {
        Push(TokenType::kCloseStatement, "%}", cursor_);
        cursor_ += 3;
        SkipLeadingWhitespace();
        continue;
      }
      if (next == '}') {
        Push(TokenType::kCloseExpression, "}}", cursor_);
        cursor_ += 3;
        SkipLeadingWhitespace();
        continue;
      }
    }
    if (c == '-' || c == '+') {
      if (!have_last || last == TokenType::kText) {
        return Error(cursor_, absl::StrCat("unexpected character '",
                                           std::string(1, c), "'"));
      }
      bool binary = last == TokenType::kIdentifier ||
                    last == TokenType::kNumericLiteral ||
                    last == TokenType::kStringLiteral ||
                    last == TokenType::kCloseParen ||
                    last == TokenType::kCloseSquareBracket;
      if (!binary) {
        size_t start = cursor_;
        ++cursor_;
        QUANT_ASSIGN_OR_RETURN(std::string num, ConsumeDigits());
        if (!num.empty() && At(cursor_) == '.' && IsDigit(At(cursor_ + 1))) {
          ++cursor_;
          QUANT_ASSIGN_OR_RETURN(std::string fraction, ConsumeDigits());
          num += "." + fraction;
        }
        Push(num.empty() ? TokenType::kUnaryOperator
                         : TokenType::kNumericLiteral,
             std::string(1, c) + num, start);
        continue;
      }
    }
    bool matched = false;
    for (const Rule& rule : kRules) {
      absl::string_view seq = rule.seq;
      if (seq == "}}" && curly_depth_ > 0) continue;
      if (src_.compare(cursor_, seq.size(), seq.data(), seq.size()) != 0)
        continue;
      Push(rule.type, std::string(seq), cursor_);
      if (rule.type == TokenType::kOpenExpression) {
        curly_depth_ = 0;
      } else if (rule.type == TokenType::kOpenCurlyBracket) {
        ++curly_depth_;
      } else if (rule.type == TokenType::kCloseCurlyBracket) {
        --curly_depth_;
      }
      cursor_ += seq.size();
      matched = true;
      break;
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      size_t open = cursor_;
      ++cursor_;
      QUANT_ASSIGN_OR_RETURN(std::string str, ConsumeString(c, open));
      Push(TokenType::kStringLiteral, std::move(str), open);
      ++cursor_;
      continue;
    }
    if (IsDigit(c)) {
      size_t start = cursor_;
      QUANT_ASSIGN_OR_RETURN(std::string num, ConsumeDigits());
      if (last != TokenType::kDot && At(cursor_) == '.' &&
          IsDigit(At(cursor_ + 1))) {
        ++cursor_;
        QUANT_ASSIGN_OR_RETURN(std::string fraction, ConsumeDigits());
        num += "." + fraction;
      }
      Push(TokenType::kNumericLiteral, std::move(num), start);
      continue;
    }
    if (IsWordChar(c)) {
      size_t start = cursor_;
      QUANT_ASSIGN_OR_RETURN(std::string word, ConsumeWhile([this](size_t p) {
                               return p < src_.size() && IsWordChar(src_[p]);
                             }));
      Push(TokenType::kIdentifier, std::move(word), start);
      continue;
    }
    return Error(cursor_, absl::StrCat("unexpected character '",
                                       std::string(1, c), "'"));
  }
  return std::move(tokens_);
}

}  // namespace

std::string PreprocessTemplate(absl::string_view source) {
  return Preprocess(source).text;
}

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source) {
  Lexer lexer(source);
  return lexer.Run();
}

}  // namespace quant::jinja
