// A compiled PCRE2 pattern, for tokenizer pre-tokenizers and normalisers and
// for the layer-name patterns of recipes. The Llama 3 and Qwen patterns need
// look-ahead and \p{..} classes, which RE2 lacks; PCRE2 runs them in UTF + UCP
// mode, JIT-compiled when available.
#ifndef QUANT_CORE_BASE_REGEX_H_
#define QUANT_CORE_BASE_REGEX_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

class Regex {
 public:
  // A match as [begin, end) byte offsets into the searched text.
  using Match = std::pair<size_t, size_t>;

  // Compiles `pattern` (UTF-8). Errors give PCRE2's message and offset.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(
      absl::string_view pattern);
  // Matches `literal` exactly (regex metacharacters have no meaning).
  static absl::StatusOr<std::unique_ptr<Regex>> CompileLiteral(
      absl::string_view literal);

  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches, left to right. An empty match advances the
  // search by one character. `text` must be valid UTF-8. PCRE2 giving up
  // (its match, depth or heap limit, reached by a pattern that backtracks
  // catastrophically) is ResourceExhausted naming the pattern and the
  // offset, never a shorter list of matches. Thread-safe.
  absl::StatusOr<std::vector<Match>> FindAll(absl::string_view text) const;

  // Whether the whole of `text` matches (as if the pattern were wrapped in
  // \A(?:...)\z, but without re-parsing it). False for invalid UTF-8.
  // Thread-safe.
  bool FullMatch(absl::string_view text) const;

  // FullMatch for untrusted patterns (recipes): PCRE2 gives up after
  // `match_limit` steps of its matcher (a catastrophically backtracking
  // pattern reaches the default limit in seconds, this one in
  // milliseconds), and giving up is an error, ResourceExhausted, never
  // "no match". Thread-safe.
  static constexpr uint32_t kBoundedMatchLimit = 100'000;
  absl::StatusOr<bool> BoundedFullMatch(
      absl::string_view text, uint32_t match_limit = kBoundedMatchLimit) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string pattern, void* code)
      : pattern_(std::move(pattern)), code_(code) {}
  static absl::StatusOr<std::unique_ptr<Regex>> CompileWithOptions(
      absl::string_view pattern, unsigned int extra_options);

  std::string pattern_;
  void* code_;  // pcre2_code_8*; kept opaque so pcre2.h stays private.
};

}  // namespace quant

#endif  // QUANT_CORE_BASE_REGEX_H_
