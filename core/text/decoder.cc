// Decoder implementations (as in the Rust tokenizers crate) and their JSON
// factory.
#include "core/text/decoder.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/json_fields.h"
#include "core/base/regex.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"
#include "core/text/byte_level.h"
#include "core/text/pattern.h"

namespace quant {
namespace {

using json_fields::Json;

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    for (const auto& part : parts_) {
      QUANT_ASSIGN_OR_RETURN(tokens, part->DecodeChain(std::move(tokens)));
    }
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      QUANT_ASSIGN_OR_RETURN(token, ReplaceAll(*pattern_, token, content_));
    }
    return tokens;
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Runs of "<0xXX>" tokens become the bytes they name when those form valid
// UTF-8; otherwise each byte token becomes U+FFFD.
class ByteFallbackDecoder : public Decoder {
 public:
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending_bytes;
    auto flush = [&] {
      if (pending_bytes.empty()) return;
      if (IsValidUtf8(pending_bytes)) {
        out.push_back(pending_bytes);
      } else {
        for (size_t i = 0; i < pending_bytes.size(); ++i) {
          out.emplace_back(kReplacementCharacter);
        }
      }
      pending_bytes.clear();
    };
    for (std::string& token : tokens) {
      int byte = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 &&
          token[5] == '>') {
        byte = ParseHexByte(token[3], token[4]);
      }
      if (byte >= 0) {
        pending_bytes.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    return out;
  }

 private:
  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  static int ParseHexByte(char high, char low) {
    const int h = HexDigit(high);
    const int l = HexDigit(low);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    return std::vector<std::string>{absl::StrJoin(tokens, "")};
  }
};

// Removes up to `start` leading and `stop` trailing copies of one
// character from every token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      absl::string_view view(token);
      for (size_t i = 0; i < start_ && absl::StartsWith(view, content_); ++i) {
        view.remove_prefix(content_.size());
      }
      for (size_t i = 0; i < stop_ && absl::EndsWith(view, content_); ++i) {
        view.remove_suffix(content_.size());
      }
      token = std::string(view);
    }
    return tokens;
  }

 private:
  std::string content_;
  size_t start_;
  size_t stop_;
};

// Maps byte-level characters back to bytes over the whole token list; a
// token with characters outside the mapping (an added token, say) keeps its
// own UTF-8 bytes. Invalid UTF-8 in the result becomes U+FFFD.
class ByteLevelDecoder : public Decoder {
 public:
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      if (!ByteLevelToBytes(token, &bytes)) bytes += token;
    }
    return std::vector<std::string>{ReplaceInvalidUtf8(bytes)};
  }
};

// SentencePiece style: the replacement character becomes a space, and the
// space it put before the first word is dropped.
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = absl::StrReplaceAll(tokens[i], {{replacement_, " "}});
      if (i == 0 && strip_first_ && absl::StartsWith(tokens[i], " ")) {
        tokens[i].erase(0, 1);
      }
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(
    const Json& config, const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(const std::string type,
                         json_fields::ComponentType(config, path));
  if (type == "Sequence") {
    QUANT_ASSIGN_OR_RETURN(const Json* items,
                           json_fields::GetArray(config, "decoders", path));
    const std::string items_path = json_fields::FieldPath(path, "decoders");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < items->size(); ++i) {
      QUANT_ASSIGN_OR_RETURN(
          std::unique_ptr<Decoder> part,
          DecoderFromJson((*items)[i], json_fields::IndexPath(items_path, i)));
      parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  if (type == "Replace") {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> pattern,
                           PatternFromJson(config, path));
    QUANT_ASSIGN_OR_RETURN(std::string content,
                           json_fields::GetString(config, "content", path));
    return std::make_unique<ReplaceDecoder>(std::move(pattern),
                                            std::move(content));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    QUANT_ASSIGN_OR_RETURN(std::string content,
                           json_fields::GetString(config, "content", path));
    if (!IsValidUtf8(content) || content.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          json_fields::FieldPath(path, "content"), ": expected one character"));
    }
    size_t pos = 0;
    DecodeUtf8At(content, &pos);
    if (pos != content.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          json_fields::FieldPath(path, "content"), ": expected one character"));
    }
    QUANT_ASSIGN_OR_RETURN(const int64_t start,
                           json_fields::GetIntOr(config, "start", 0, path));
    QUANT_ASSIGN_OR_RETURN(const int64_t stop,
                           json_fields::GetIntOr(config, "stop", 0, path));
    if (start < 0 || stop < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": start and stop must not be negative"));
    }
    return std::make_unique<StripDecoder>(std::move(content),
                                          static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    QUANT_ASSIGN_OR_RETURN(
        std::string replacement,
        json_fields::GetStringOr(config, "replacement", "\xE2\x96\x81", path));
    QUANT_ASSIGN_OR_RETURN(
        const bool add_prefix_space,
        json_fields::GetBoolOr(config, "add_prefix_space", true, path));
    QUANT_ASSIGN_OR_RETURN(
        const std::string scheme,
        json_fields::GetStringOr(config, "prepend_scheme",
                                 add_prefix_space ? "always" : "never", path));
    return std::make_unique<MetaspaceDecoder>(std::move(replacement),
                                              scheme != "never");
  }
  return json_fields::Unsupported("decoder", type, path);
}

}  // namespace quant
