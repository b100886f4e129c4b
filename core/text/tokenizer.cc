// Tokenizer: loading of tokenizer.json / tokenizer_config.json and the
// encode / decode pipelines.
#include "core/text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/base/file_util.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/base/utf8.h"
#include "core/text/added_vocabulary.h"
#include "core/text/bpe_model.h"
#include "core/text/decoder.h"
#include "core/text/normalizer.h"
#include "core/text/post_processor.h"
#include "core/text/pre_tokenizer.h"

namespace quant {
namespace {

using json_fields::Json;

constexpr char kTokenizerFile[] = "tokenizer.json";
constexpr char kConfigFile[] = "tokenizer_config.json";

// Prefixes an error with the file it came from.
absl::Status InFile(absl::string_view file, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(file, ": ", status.message()));
}

// A field that is absent or null.
bool IsAbsent(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null();
}

// bos_token / eos_token in tokenizer_config.json: a string, an AddedToken
// object with "content", or null.
absl::StatusOr<std::optional<std::string>> SpecialTokenName(const Json& config,
                                                            const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    QUANT_ASSIGN_OR_RETURN(std::string content,
                           json_fields::GetString(*it, "content", key));
    return content;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(key, ": expected a string or an object with \"content\""));
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromDirectory(
    const std::string& dir, FileSystem* fs) {
  // A large vocabulary's tokenizer.json is tens of MiB; the bounds keep a
  // wrong path from reading a multi-GB file.
  const std::string tokenizer_path = JoinPath(dir, kTokenizerFile);
  QUANT_ASSIGN_OR_RETURN(const std::string tokenizer_json,
                         fs->ReadFile(tokenizer_path, size_t{1} << 30));
  std::string config_json;
  const std::string config_path = JoinPath(dir, kConfigFile);
  if (FileExists(config_path)) {
    QUANT_ASSIGN_OR_RETURN(config_json,
                           fs->ReadFile(config_path, size_t{256} << 20));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      FromJson(tokenizer_json, config_json);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(dir, "/", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(
    absl::string_view tokenizer_json, absl::string_view tokenizer_config_json) {
  QUANT_ASSIGN_OR_RETURN(const Json root,
                         ParseJsonFile(tokenizer_json, kTokenizerFile));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kTokenizerFile, ": expected a JSON object"));
  }
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  auto build = [&]() -> absl::Status {
    for (const char* batch_option : {"truncation", "padding"}) {
      // Encode works on one text of any length; these would change ids.
      if (!IsAbsent(root, batch_option)) {
        return absl::InvalidArgumentError(absl::StrCat(
            batch_option, ": must be null (batch options are not supported)"));
      }
    }
    if (!IsAbsent(root, "normalizer")) {
      QUANT_ASSIGN_OR_RETURN(
          tokenizer->normalizer_,
          NormalizerFromJson(root["normalizer"], "normalizer"));
    }
    if (!IsAbsent(root, "pre_tokenizer")) {
      QUANT_ASSIGN_OR_RETURN(
          tokenizer->pre_tokenizer_,
          PreTokenizerFromJson(root["pre_tokenizer"], "pre_tokenizer"));
    }
    if (IsAbsent(root, "model")) {
      return absl::InvalidArgumentError("model: missing");
    }
    const Json& model = root["model"];
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(model, "model"));
    // Files written by old versions may leave out the type of a BPE model.
    QUANT_ASSIGN_OR_RETURN(
        const std::string model_type,
        json_fields::GetStringOr(
            model, "type", model.contains("merges") ? "BPE" : "", "model"));
    if (model_type != "BPE") {
      return json_fields::Unsupported("model", model_type, "model");
    }
    QUANT_ASSIGN_OR_RETURN(tokenizer->model_,
                           BpeModel::FromJson(model, "model"));
    if (!IsAbsent(root, "post_processor")) {
      QUANT_ASSIGN_OR_RETURN(
          tokenizer->post_processor_,
          PostProcessorFromJson(root["post_processor"], "post_processor"));
    }
    if (!IsAbsent(root, "decoder")) {
      QUANT_ASSIGN_OR_RETURN(tokenizer->decoder_,
                             DecoderFromJson(root["decoder"], "decoder"));
    }
    const Json null_json;
    auto added = root.find("added_tokens");
    QUANT_ASSIGN_OR_RETURN(AddedVocabulary added_vocabulary,
                           AddedVocabulary::FromJson(
                               added == root.end() ? null_json : *added,
                               "added_tokens", tokenizer->normalizer_.get()));
    tokenizer->added_vocabulary_ =
        std::make_unique<AddedVocabulary>(std::move(added_vocabulary));
    tokenizer->vocab_size_ = tokenizer->model_->vocab_size();
    for (const AddedToken& token : tokenizer->added_vocabulary_->tokens()) {
      tokenizer->vocab_size_ = std::max(tokenizer->vocab_size_, token.id + 1);
    }
    if (tokenizer->post_processor_ != nullptr) {
      // The special tokens a template adds do not depend on the text: every
      // one of them must be a token of the vocabulary.
      for (int32_t id : tokenizer->post_processor_->AddSpecialTokens({})) {
        if (!tokenizer->IdToToken(id).has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat("post_processor: special token id ", id,
                           " is not in the vocabulary"));
        }
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status status = build(); !status.ok()) {
    return InFile(kTokenizerFile, status);
  }
  if (absl::Status status = tokenizer->LoadConfig(tokenizer_config_json);
      !status.ok()) {
    return InFile(kConfigFile, status);
  }
  return tokenizer;
}

absl::Status Tokenizer::LoadConfig(absl::string_view tokenizer_config_json) {
  if (tokenizer_config_json.empty()) return absl::OkStatus();
  // The caller prefixes the file name.
  absl::StatusOr<Json> parsed = ParseJsonFile(tokenizer_config_json, "");
  if (!parsed.ok()) {
    absl::string_view message = parsed.status().message();
    absl::ConsumePrefix(&message, ": ");
    return absl::InvalidArgumentError(message);
  }
  const Json config = *std::move(parsed);
  if (!config.is_object()) {
    return absl::InvalidArgumentError("expected a JSON object");
  }
  for (const auto& [key, id] : {std::make_pair("bos_token", &bos_id_),
                                std::make_pair("eos_token", &eos_id_)}) {
    QUANT_ASSIGN_OR_RETURN(const std::optional<std::string> name,
                           SpecialTokenName(config, key));
    if (!name.has_value()) continue;
    absl::StatusOr<int32_t> token_id = TokenToId(*name);
    if (!token_id.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, ": '", *name, "' is not in the tokenizer's vocabulary"));
    }
    *id = *token_id;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(
    absl::string_view text, bool add_special_tokens) const {
  const std::string valid_text = ReplaceInvalidUtf8(text);
  QUANT_ASSIGN_OR_RETURN(std::vector<InputPiece> pieces,
                         added_vocabulary_->Split(valid_text));
  std::vector<int32_t> ids;
  for (InputPiece& piece : pieces) {
    if (piece.token_id.has_value()) {
      ids.push_back(*piece.token_id);
      continue;
    }
    std::vector<std::string> words;
    words.push_back(std::move(piece.text));
    if (pre_tokenizer_ != nullptr) {
      QUANT_ASSIGN_OR_RETURN(words, pre_tokenizer_->PreTokenize(
                                        std::move(words), piece.at_text_start));
    }
    for (const std::string& word : words) model_->Tokenize(word, &ids);
  }
  if (add_special_tokens && post_processor_ != nullptr) {
    ids = post_processor_->AddSpecialTokens(std::move(ids));
  }
  return ids;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* added = added_vocabulary_->FindById(id)) {
      if (skip_special_tokens && added->special) continue;
      tokens.push_back(added->content);
    } else if (const std::string* token = model_->IdToToken(id)) {
      // A model token whose text is also a special added token counts as
      // special, as the library compares by content.
      if (skip_special_tokens) {
        std::optional<int32_t> added_id = added_vocabulary_->TokenToId(*token);
        if (added_id.has_value() && IsSpecial(*added_id)) continue;
      }
      tokens.push_back(*token);
    }
  }
  if (decoder_ == nullptr) return absl::StrJoin(tokens, " ");
  QUANT_ASSIGN_OR_RETURN(std::vector<std::string> decoded,
                         decoder_->DecodeChain(std::move(tokens)));
  return absl::StrJoin(decoded, "");
}

absl::StatusOr<int32_t> Tokenizer::TokenToId(absl::string_view token) const {
  if (std::optional<int32_t> id = added_vocabulary_->TokenToId(token))
    return *id;
  if (std::optional<int32_t> id = model_->TokenToId(token)) return *id;
  return absl::NotFoundError(
      absl::StrCat("token '", token, "' is not in the vocabulary"));
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_vocabulary_->FindById(id)) {
    return added->content;
  }
  if (const std::string* token = model_->IdToToken(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* added = added_vocabulary_->FindById(id);
  return added != nullptr && added->special;
}

}  // namespace quant
