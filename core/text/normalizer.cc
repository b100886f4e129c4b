// Normaliser implementations and their JSON factory.
#include "core/text/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/json_fields.h"
#include "core/base/regex.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"
#include "core/text/pattern.h"

namespace quant {
namespace {

using json_fields::Json;

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  absl::StatusOr<std::string> Normalize(absl::string_view text) const override {
    std::string current(text);
    for (const auto& part : parts_) {
      QUANT_ASSIGN_OR_RETURN(current, part->Normalize(current));
    }
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// Prepends a string to non-empty text (SentencePiece's leading "▁").
class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  absl::StatusOr<std::string> Normalize(absl::string_view text) const override {
    if (text.empty()) return "";
    std::string out = prefix_;
    out.append(text.data(), text.size());
    return out;
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  absl::StatusOr<std::string> Normalize(absl::string_view text) const override {
    return ReplaceAll(*pattern_, text, content_);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Unicode normalisation forms through utf8proc.
class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  absl::StatusOr<std::string> Normalize(absl::string_view text) const override {
    if (text.empty()) return "";
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                     static_cast<utf8proc_option_t>(options_));
    // The input is valid UTF-8, so utf8proc fails only on allocation or a
    // text too long for it; text left unnormalised would tokenize wrongly.
    if (length < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Unicode normalisation of a ", text.size(),
                       "-byte text failed: ", utf8proc_errmsg(length)));
    }
    std::string out(reinterpret_cast<const char*>(mapped),
                    static_cast<size_t>(length));
    std::free(mapped);
    return out;
  }

 private:
  int options_;
};

// Strips Unicode whitespace from the left and/or right.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  absl::StatusOr<std::string> Normalize(absl::string_view text) const override {
    size_t begin = 0;
    size_t end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!IsUnicodeWhitespace(DecodeUtf8At(text, &next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin &&
               (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
          --start;
        }
        size_t next = start;
        if (!IsUnicodeWhitespace(DecodeUtf8At(text, &next))) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_;
  bool right_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(
    const Json& config, const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(const std::string type,
                         json_fields::ComponentType(config, path));
  if (type == "Sequence") {
    QUANT_ASSIGN_OR_RETURN(const Json* items,
                           json_fields::GetArray(config, "normalizers", path));
    std::vector<std::unique_ptr<Normalizer>> parts;
    const std::string items_path = json_fields::FieldPath(path, "normalizers");
    for (size_t i = 0; i < items->size(); ++i) {
      QUANT_ASSIGN_OR_RETURN(
          std::unique_ptr<Normalizer> part,
          NormalizerFromJson((*items)[i],
                             json_fields::IndexPath(items_path, i)));
      parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "Prepend") {
    QUANT_ASSIGN_OR_RETURN(std::string prefix,
                           json_fields::GetString(config, "prepend", path));
    return std::make_unique<PrependNormalizer>(std::move(prefix));
  }
  if (type == "Replace") {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> pattern,
                           PatternFromJson(config, path));
    QUANT_ASSIGN_OR_RETURN(std::string content,
                           json_fields::GetString(config, "content", path));
    return std::make_unique<ReplaceNormalizer>(std::move(pattern),
                                               std::move(content));
  }
  if (type == "NFC") {
    return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE |
                                               UTF8PROC_COMPOSE);
  }
  if (type == "NFD") {
    return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE |
                                               UTF8PROC_DECOMPOSE);
  }
  if (type == "NFKC") {
    return std::make_unique<UnicodeNormalizer>(
        UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "NFKD") {
    return std::make_unique<UnicodeNormalizer>(
        UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "Strip") {
    QUANT_ASSIGN_OR_RETURN(
        const bool left,
        json_fields::GetBoolOr(config, "strip_left", true, path));
    QUANT_ASSIGN_OR_RETURN(
        const bool right,
        json_fields::GetBoolOr(config, "strip_right", true, path));
    return std::make_unique<StripNormalizer>(left, right);
  }
  return json_fields::Unsupported("normalizer", type, path);
}

}  // namespace quant
