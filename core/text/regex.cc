// PCRE2 wrapper: compile in UTF + UCP mode (JIT when available), find all.
#include "core/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "core/text/utf8.h"

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
  if (!IsValidUtf8(pattern)) {
    return absl::InvalidArgumentError("regex pattern is not valid UTF-8");
  }
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      // PCRE2_LITERAL allows no UCP, which a literal does not need anyway.
      PCRE2_UTF | (extra_options & PCRE2_LITERAL ? 0 : PCRE2_UCP) |
          extra_options,
      &error_code, &error_offset, nullptr);
  if (code == nullptr) {
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

std::vector<Regex::Match> Regex::FindAll(absl::string_view text) const {
  std::vector<Match> matches;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match_data =
      pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start,
                               PCRE2_NO_UTF_CHECK, match_data, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit.
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      // An empty match yields nothing; step over one whole character.
      if (begin >= text.size()) break;
      size_t next = begin;
      DecodeUtf8At(text, &next);
      start = next;
    }
  }
  pcre2_match_data_free(match_data);
  return matches;
}

}  // namespace quant
