// PCRE2 wrapper: compile in UTF + UCP mode (JIT when available), find all,
// full match.
#include "core/base/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace quant {

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(
    absl::string_view pattern) {
  return CompileWithOptions(pattern, 0);
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::CompileLiteral(
    absl::string_view literal) {
  return CompileWithOptions(literal, PCRE2_LITERAL);
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::CompileWithOptions(
    absl::string_view pattern, unsigned int extra_options) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      // PCRE2_LITERAL allows no UCP, which a literal does not need anyway.
      PCRE2_UTF | (extra_options & PCRE2_LITERAL ? 0 : PCRE2_UCP) |
          extra_options,
      &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    // PCRE2 validates the pattern's UTF-8 itself (PCRE2_UTF without
    // PCRE2_NO_UTF_CHECK); do not echo invalid bytes back.
    if (error_code < 0) {
      return absl::InvalidArgumentError("regex pattern is not valid UTF-8");
    }
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(
        absl::StrCat("cannot compile regex '", pattern, "' at offset ",
                     error_offset, ": ", reinterpret_cast<char*>(message)));
  }
  // JIT is an optimisation only: where it is unavailable the interpreter
  // gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<Regex>(new Regex(std::string(pattern), code));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {

// A pattern echoed in an error, cut so that a long one cannot swamp it.
std::string PatternForMessage(const std::string& pattern) {
  constexpr size_t kMaxEcho = 256;
  if (pattern.size() <= kMaxEcho) return pattern;
  size_t cut = kMaxEcho;
  while (cut > 0 && (static_cast<unsigned char>(pattern[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return absl::StrCat(pattern.substr(0, cut), "...");
}

}  // namespace

absl::StatusOr<std::vector<Regex::Match>> Regex::FindAll(
    absl::string_view text) const {
  std::vector<Match> matches;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match_data =
      pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start,
                               PCRE2_NO_UTF_CHECK, match_data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // A limit reached, or a matcher error: the matches found so far are
      // not all of them, so none are returned.
      pcre2_match_data_free(match_data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      return absl::ResourceExhaustedError(
          absl::StrCat("pattern '", PatternForMessage(pattern_),
                       "' gave up at byte ", start, " of a ", text.size(),
                       "-byte text (", reinterpret_cast<char*>(message),
                       "): it backtracks catastrophically on this input"));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      // An empty match yields nothing; step over one whole character.
      if (begin >= text.size()) break;
      // `text` is valid UTF-8, so the character ends before the next byte
      // that is not a continuation byte (10xxxxxx).
      size_t next = begin + 1;
      while (next < text.size() &&
             (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) {
        ++next;
      }
      start = next;
    }
  }
  pcre2_match_data_free(match_data);
  return matches;
}

bool Regex::FullMatch(absl::string_view text) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match_data =
      pcre2_match_data_create_from_pattern(code, nullptr);
  // Match-time ANCHORED/ENDANCHORED make PCRE2 use its interpreter rather
  // than the JIT code; the result is the same. Without PCRE2_NO_UTF_CHECK,
  // invalid UTF-8 in `text` is an error (rc < 0), i.e. no match.
  const int rc =
      pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                  0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, match_data, nullptr);
  pcre2_match_data_free(match_data);
  return rc >= 0;
}

absl::StatusOr<bool> Regex::BoundedFullMatch(absl::string_view text,
                                             uint32_t match_limit) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  if (context == nullptr) {
    return absl::ResourceExhaustedError("cannot allocate a match context");
  }
  pcre2_set_match_limit(context, match_limit);
  // The backtracking depth and heap are bounded by the same budget.
  pcre2_set_depth_limit(context, match_limit);
  pcre2_set_heap_limit(context, 64 * 1024);  // KiB.
  pcre2_match_data* match_data =
      pcre2_match_data_create_from_pattern(code, nullptr);
  const int rc =
      pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                  0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, match_data, context);
  pcre2_match_data_free(match_data);
  pcre2_match_context_free(context);
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH || rc == PCRE2_ERROR_PARTIAL) return false;
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(rc, message, sizeof(message));
  if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
      rc == PCRE2_ERROR_HEAPLIMIT) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "pattern '", PatternForMessage(pattern_), "' gave up matching \"", text,
        "\" (", reinterpret_cast<char*>(message),
        "): it backtracks catastrophically; simplify it"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "pattern '", PatternForMessage(pattern_), "' cannot match \"", text,
      "\": ", reinterpret_cast<char*>(message)));
}

}  // namespace quant
