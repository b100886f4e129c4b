// Pre-tokenizer implementations (as in the Rust tokenizers crate) and their
// JSON factory.
#include "core/text/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/base/json_fields.h"
#include "core/base/regex.h"
#include "core/base/status_macros.h"
#include "core/text/byte_level.h"
#include "core/text/pattern.h"

namespace quant {
namespace {

using json_fields::Json;

// GPT-2's pre-tokenizer pattern, used by ByteLevel with use_regex.
constexpr absl::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

enum class SplitBehavior {
  kRemoved,
  kIsolated,
  kMergedWithPrevious,
  kMergedWithNext,
  kContiguous,
};

absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& name,
                                            const std::string& path) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": unknown split behavior '", name, "'"));
}

struct Segment {
  size_t begin;
  size_t end;
  bool is_match;
};

// Splits `text` around the matches of `pattern` the way the Rust crate's
// NormalizedString::split does, appending non-empty pieces to `out`.
absl::Status SplitByPattern(const Regex& pattern, SplitBehavior behavior,
                            bool invert, const std::string& text,
                            std::vector<std::string>* out) {
  QUANT_ASSIGN_OR_RETURN(const std::vector<Regex::Match> matches,
                         pattern.FindAll(text));
  std::vector<Segment> segments;
  size_t previous = 0;
  for (const Regex::Match& match : matches) {
    if (previous != match.first) {
      segments.push_back({previous, match.first, invert});
    }
    segments.push_back({match.first, match.second, !invert});
    previous = match.second;
  }
  if (previous != text.size()) {
    segments.push_back({previous, text.size(), invert});
  }

  std::vector<Segment> kept;  // is_match here means "remove".
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Segment& s : segments) kept.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kRemoved:
      kept = segments;
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty()) {
          kept.back().begin = it->begin;
        } else {
          kept.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Segment& s : kept) {
    if (s.is_match || s.end == s.begin) continue;
    out->push_back(text.substr(s.begin, s.end - s.begin));
  }
  return absl::OkStatus();
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(
      std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  absl::StatusOr<std::vector<std::string>> PreTokenize(
      std::vector<std::string> pieces,
      bool first_at_text_start) const override {
    for (const auto& part : parts_) {
      QUANT_ASSIGN_OR_RETURN(
          pieces, part->PreTokenize(std::move(pieces), first_at_text_start));
    }
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> pattern, SplitBehavior behavior,
                    bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  absl::StatusOr<std::vector<std::string>> PreTokenize(
      std::vector<std::string> pieces, bool) const override {
    std::vector<std::string> out;
    for (const std::string& piece : pieces) {
      QUANT_RETURN_IF_ERROR(
          SplitByPattern(*pattern_, behavior_, invert_, piece, &out));
    }
    return out;
  }

 private:
  std::unique_ptr<Regex> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Optionally adds a leading space and splits with GPT-2's pattern, then maps
// every byte to its printable byte-level character.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  absl::StatusOr<std::vector<std::string>> PreTokenize(
      std::vector<std::string> pieces, bool) const override {
    std::vector<std::string> split;
    for (std::string& piece : pieces) {
      if (piece.empty()) continue;
      if (add_prefix_space_ && piece[0] != ' ') piece.insert(0, " ");
      if (regex_ != nullptr) {
        QUANT_RETURN_IF_ERROR(SplitByPattern(*regex_, SplitBehavior::kIsolated,
                                             false, piece, &split));
      } else {
        split.push_back(std::move(piece));
      }
    }
    for (std::string& piece : split) piece = BytesToByteLevel(piece);
    return split;
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;  // Null when use_regex is false.
};

enum class PrependScheme { kAlways, kFirst, kNever };

// SentencePiece style: spaces become the replacement character ("▁"),
// which is also prepended, and words may be split before each "▁".
class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme,
                        std::unique_ptr<Regex> split_pattern)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_pattern_(std::move(split_pattern)) {}
  absl::StatusOr<std::vector<std::string>> PreTokenize(
      std::vector<std::string> pieces,
      bool first_at_text_start) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string piece = absl::StrReplaceAll(pieces[i], {{" ", replacement_}});
      const bool prepend =
          scheme_ == PrependScheme::kAlways ||
          (scheme_ == PrependScheme::kFirst && i == 0 && first_at_text_start);
      if (prepend && !absl::StartsWith(piece, replacement_)) {
        piece.insert(0, replacement_);
      }
      if (split_pattern_ != nullptr) {
        QUANT_RETURN_IF_ERROR(SplitByPattern(*split_pattern_,
                                             SplitBehavior::kMergedWithNext,
                                             false, piece, &out));
      } else if (!piece.empty()) {
        out.push_back(std::move(piece));
      }
    }
    return out;
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  std::unique_ptr<Regex> split_pattern_;  // Null when split is false.
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> MetaspaceFromJson(
    const Json& config, const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(
      std::string replacement,
      json_fields::GetStringOr(config, "replacement", "\xE2\x96\x81", path));
  QUANT_ASSIGN_OR_RETURN(const bool split,
                         json_fields::GetBoolOr(config, "split", true, path));
  // Older files say add_prefix_space instead of prepend_scheme.
  QUANT_ASSIGN_OR_RETURN(
      const bool add_prefix_space,
      json_fields::GetBoolOr(config, "add_prefix_space", true, path));
  QUANT_ASSIGN_OR_RETURN(
      const std::string scheme_name,
      json_fields::GetStringOr(config, "prepend_scheme",
                               add_prefix_space ? "always" : "never", path));
  PrependScheme scheme;
  if (scheme_name == "always") {
    scheme = PrependScheme::kAlways;
  } else if (scheme_name == "first") {
    scheme = PrependScheme::kFirst;
  } else if (scheme_name == "never") {
    scheme = PrependScheme::kNever;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(json_fields::FieldPath(path, "prepend_scheme"),
                     ": unknown value '", scheme_name, "'"));
  }
  std::unique_ptr<Regex> split_pattern;
  if (split) {
    QUANT_ASSIGN_OR_RETURN(split_pattern, Regex::CompileLiteral(replacement));
  }
  return std::make_unique<MetaspacePreTokenizer>(std::move(replacement), scheme,
                                                 std::move(split_pattern));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(
    const Json& config, const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(const std::string type,
                         json_fields::ComponentType(config, path));
  if (type == "Sequence") {
    QUANT_ASSIGN_OR_RETURN(
        const Json* items,
        json_fields::GetArray(config, "pretokenizers", path));
    const std::string items_path =
        json_fields::FieldPath(path, "pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < items->size(); ++i) {
      QUANT_ASSIGN_OR_RETURN(
          std::unique_ptr<PreTokenizer> part,
          PreTokenizerFromJson((*items)[i],
                               json_fields::IndexPath(items_path, i)));
      parts.push_back(std::move(part));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split") {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> pattern,
                           PatternFromJson(config, path));
    QUANT_ASSIGN_OR_RETURN(const std::string behavior_name,
                           json_fields::GetString(config, "behavior", path));
    QUANT_ASSIGN_OR_RETURN(
        const SplitBehavior behavior,
        ParseBehavior(behavior_name, json_fields::FieldPath(path, "behavior")));
    QUANT_ASSIGN_OR_RETURN(
        const bool invert,
        json_fields::GetBoolOr(config, "invert", false, path));
    return std::make_unique<SplitPreTokenizer>(std::move(pattern), behavior,
                                               invert);
  }
  if (type == "ByteLevel") {
    QUANT_ASSIGN_OR_RETURN(
        const bool add_prefix_space,
        json_fields::GetBoolOr(config, "add_prefix_space", true, path));
    QUANT_ASSIGN_OR_RETURN(
        const bool use_regex,
        json_fields::GetBoolOr(config, "use_regex", true, path));
    std::unique_ptr<Regex> regex;
    if (use_regex) {
      QUANT_ASSIGN_OR_RETURN(regex, Regex::Compile(kGpt2Pattern));
    }
    return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space,
                                                   std::move(regex));
  }
  if (type == "Metaspace") return MetaspaceFromJson(config, path);
  return json_fields::Unsupported("pre-tokenizer", type, path);
}

}  // namespace quant
