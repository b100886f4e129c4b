// Added-token matching: leftmost-longest literal search with the
// single_word / lstrip / rstrip rules of the Rust tokenizers crate.
#include "core/text/added_vocabulary.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"

namespace quant {
namespace {

using json_fields::Json;

// A word character for single_word: alphanumeric or '_' (ASCII), or any
// non-ASCII character that is not whitespace.
bool IsWordCharacter(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || c == '_';
  }
  return !IsUnicodeWhitespace(c);
}

// Start of the UTF-8 character that ends just before `end`.
size_t PreviousCharStart(absl::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 &&
         (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  return start;
}

}  // namespace

absl::StatusOr<AddedVocabulary> AddedVocabulary::FromJson(
    const Json& added_tokens, const std::string& path,
    const Normalizer* normalizer) {
  AddedVocabulary vocabulary;
  vocabulary.normalizer_ = normalizer;
  if (added_tokens.is_null()) return vocabulary;
  if (!added_tokens.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an array"));
  }
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const Json& entry = added_tokens[i];
    const std::string entry_path = json_fields::IndexPath(path, i);
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(entry, entry_path));
    AddedToken token;
    QUANT_ASSIGN_OR_RETURN(const int64_t id,
                           json_fields::GetIntOr(entry, "id", -1, entry_path));
    if (id < 0 || id > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry_path, ".id: expected a non-negative integer"));
    }
    token.id = static_cast<int32_t>(id);
    QUANT_ASSIGN_OR_RETURN(
        token.content, json_fields::GetString(entry, "content", entry_path));
    if (!IsValidUtf8(token.content)) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry_path, ".content: not valid UTF-8"));
    }
    QUANT_ASSIGN_OR_RETURN(
        token.special,
        json_fields::GetBoolOr(entry, "special", false, entry_path));
    QUANT_ASSIGN_OR_RETURN(token.normalized,
                           json_fields::GetBoolOr(entry, "normalized",
                                                  !token.special, entry_path));
    QUANT_ASSIGN_OR_RETURN(
        token.single_word,
        json_fields::GetBoolOr(entry, "single_word", false, entry_path));
    QUANT_ASSIGN_OR_RETURN(
        token.lstrip,
        json_fields::GetBoolOr(entry, "lstrip", false, entry_path));
    QUANT_ASSIGN_OR_RETURN(
        token.rstrip,
        json_fields::GetBoolOr(entry, "rstrip", false, entry_path));
    const size_t index = vocabulary.tokens_.size();
    vocabulary.index_by_id_[token.id] = index;
    vocabulary.index_by_content_[token.content] = index;
    vocabulary.tokens_.push_back(std::move(token));
  }
  for (size_t index = 0; index < vocabulary.tokens_.size(); ++index) {
    const AddedToken& token = vocabulary.tokens_[index];
    if (token.normalized) {
      std::string pattern = token.content;
      if (normalizer != nullptr) {
        QUANT_ASSIGN_OR_RETURN(pattern, normalizer->Normalize(token.content));
      }
      vocabulary.AddToMatcher(&vocabulary.normalized_matcher_, index,
                              std::move(pattern));
    } else {
      vocabulary.AddToMatcher(&vocabulary.raw_matcher_, index, token.content);
    }
  }
  for (Matcher* matcher :
       {&vocabulary.raw_matcher_, &vocabulary.normalized_matcher_}) {
    for (auto& [byte, indices] : matcher->by_first_byte) {
      std::stable_sort(indices.begin(), indices.end(),
                       [matcher](size_t a, size_t b) {
                         return matcher->patterns.at(a).size() >
                                matcher->patterns.at(b).size();
                       });
    }
  }
  return vocabulary;
}

void AddedVocabulary::AddToMatcher(Matcher* matcher, size_t index,
                                   std::string pattern) {
  if (pattern.empty()) return;
  matcher->by_first_byte[static_cast<unsigned char>(pattern[0])].push_back(
      index);
  matcher->patterns[index] = std::move(pattern);
}

std::vector<AddedVocabulary::Span> AddedVocabulary::FindTokens(
    const Matcher& matcher, absl::string_view text) const {
  std::vector<Span> spans;
  size_t done = 0;    // Text before this is already in `spans`.
  size_t search = 0;  // Where the next match may start.
  while (search < text.size() && !matcher.by_first_byte.empty()) {
    // Leftmost match, longest at that position.
    size_t match_begin = text.size();
    size_t match_index = 0;
    size_t match_length = 0;
    for (size_t pos = search; pos < text.size() && match_length == 0; ++pos) {
      auto it =
          matcher.by_first_byte.find(static_cast<unsigned char>(text[pos]));
      if (it == matcher.by_first_byte.end()) continue;
      for (size_t index : it->second) {
        const std::string& pattern = matcher.patterns.at(index);
        if (text.substr(pos, pattern.size()) == pattern) {
          match_begin = pos;
          match_index = index;
          match_length = pattern.size();
          break;
        }
      }
    }
    if (match_length == 0) break;
    size_t begin = match_begin;
    size_t end = match_begin + match_length;
    search = end;
    const AddedToken& token = tokens_[match_index];
    if (token.single_word) {
      size_t after = end;
      const bool word_before = begin > 0 && [&] {
        size_t start = PreviousCharStart(text, begin);
        return IsWordCharacter(DecodeUtf8At(text, &start));
      }();
      const bool word_after =
          end < text.size() && IsWordCharacter(DecodeUtf8At(text, &after));
      if (word_before || word_after) continue;
    }
    if (begin < done) continue;  // Overlaps an earlier rstrip.
    if (token.lstrip) {
      size_t new_begin = begin;
      while (new_begin > done) {
        size_t start = PreviousCharStart(text, new_begin);
        size_t next = start;
        if (!IsUnicodeWhitespace(DecodeUtf8At(text, &next))) break;
        new_begin = start;
      }
      begin = new_begin;
    }
    if (token.rstrip) {
      while (end < text.size()) {
        size_t next = end;
        if (!IsUnicodeWhitespace(DecodeUtf8At(text, &next))) break;
        end = next;
      }
    }
    if (done < begin) spans.push_back({done, begin, std::nullopt});
    spans.push_back({begin, end, token.id});
    done = end;
  }
  if (done < text.size()) spans.push_back({done, text.size(), std::nullopt});
  return spans;
}

absl::StatusOr<std::vector<InputPiece>> AddedVocabulary::Split(
    absl::string_view text) const {
  std::vector<InputPiece> pieces;
  for (const Span& raw : FindTokens(raw_matcher_, text)) {
    const bool at_text_start = raw.begin == 0;
    if (raw.token_id.has_value()) {
      pieces.push_back(
          {std::string(text.substr(raw.begin, raw.end - raw.begin)),
           raw.token_id, at_text_start});
      continue;
    }
    const absl::string_view raw_text =
        text.substr(raw.begin, raw.end - raw.begin);
    std::string normalized(raw_text);
    if (normalizer_ != nullptr) {
      QUANT_ASSIGN_OR_RETURN(normalized, normalizer_->Normalize(raw_text));
    }
    for (const Span& span : FindTokens(normalized_matcher_, normalized)) {
      InputPiece piece{normalized.substr(span.begin, span.end - span.begin),
                       span.token_id, at_text_start && span.begin == 0};
      if (!piece.text.empty()) pieces.push_back(std::move(piece));
    }
  }
  return pieces;
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::TokenToId(
    absl::string_view content) const {
  auto it = index_by_content_.find(content);
  if (it == index_by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

}  // namespace quant
