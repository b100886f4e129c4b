// Post-processor implementations and their JSON factory.
#include "core/text/post_processor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

using json_fields::Json;

class IdentityPostProcessor : public PostProcessor {
 public:
  std::vector<int32_t> AddSpecialTokens(
      std::vector<int32_t> ids) const override {
    return ids;
  }
};

class SequencePostProcessor : public PostProcessor {
 public:
  explicit SequencePostProcessor(
      std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  std::vector<int32_t> AddSpecialTokens(
      std::vector<int32_t> ids) const override {
    for (const auto& part : parts_)
      ids = part->AddSpecialTokens(std::move(ids));
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// The "single" template: a list of special-token id runs with one slot for
// the sequence itself.
class TemplatePostProcessor : public PostProcessor {
 public:
  TemplatePostProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  std::vector<int32_t> AddSpecialTokens(
      std::vector<int32_t> ids) const override {
    std::vector<int32_t> out = before_;
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), after_.begin(), after_.end());
    return out;
  }

 private:
  std::vector<int32_t> before_;
  std::vector<int32_t> after_;
};

absl::StatusOr<std::unique_ptr<PostProcessor>> TemplateFromJson(
    const Json& config, const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(const Json* single,
                         json_fields::GetArray(config, "single", path));
  const std::string single_path = json_fields::FieldPath(path, "single");
  auto special_tokens = config.find("special_tokens");
  const std::string special_path =
      json_fields::FieldPath(path, "special_tokens");
  std::vector<int32_t> before;
  std::vector<int32_t> after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& piece = (*single)[i];
    const std::string piece_path = json_fields::IndexPath(single_path, i);
    if (piece.is_object() && piece.contains("Sequence")) {
      QUANT_ASSIGN_OR_RETURN(
          const std::string sequence_id,
          json_fields::GetString(
              piece["Sequence"], "id",
              json_fields::FieldPath(piece_path, "Sequence")));
      if (sequence_id != "A" || seen_sequence) {
        return absl::InvalidArgumentError(
            absl::StrCat(piece_path, ": the single template may only hold ",
                         "sequence A, once"));
      }
      seen_sequence = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken")) {
      return absl::InvalidArgumentError(absl::StrCat(
          piece_path,
          ": expected {\"SpecialToken\": ...} or {\"Sequence\": ...}"));
    }
    QUANT_ASSIGN_OR_RETURN(
        const std::string name,
        json_fields::GetString(
            piece["SpecialToken"], "id",
            json_fields::FieldPath(piece_path, "SpecialToken")));
    if (special_tokens == config.end() || !special_tokens->is_object() ||
        !special_tokens->contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          special_path, ": no entry for '", name, "' used by ", piece_path));
    }
    const std::string entry_path = json_fields::FieldPath(special_path, name);
    QUANT_ASSIGN_OR_RETURN(
        const Json* ids,
        json_fields::GetArray((*special_tokens)[name], "ids", entry_path));
    for (const Json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat(entry_path, ".ids: expected non-negative integers"));
      }
      (seen_sequence ? after : before).push_back(id.get<int32_t>());
    }
  }
  if (!seen_sequence) {
    return absl::InvalidArgumentError(
        absl::StrCat(single_path, ": no {\"Sequence\": {\"id\": \"A\"}}"));
  }
  return std::make_unique<TemplatePostProcessor>(std::move(before),
                                                 std::move(after));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessorFromJson(
    const Json& config, const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(const std::string type,
                         json_fields::ComponentType(config, path));
  if (type == "TemplateProcessing") return TemplateFromJson(config, path);
  if (type == "ByteLevel") return std::make_unique<IdentityPostProcessor>();
  if (type == "Sequence") {
    QUANT_ASSIGN_OR_RETURN(const Json* items,
                           json_fields::GetArray(config, "processors", path));
    const std::string items_path = json_fields::FieldPath(path, "processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < items->size(); ++i) {
      QUANT_ASSIGN_OR_RETURN(
          std::unique_ptr<PostProcessor> part,
          PostProcessorFromJson((*items)[i],
                                json_fields::IndexPath(items_path, i)));
      parts.push_back(std::move(part));
    }
    return std::make_unique<SequencePostProcessor>(std::move(parts));
  }
  return json_fields::Unsupported("post-processor", type, path);
}

}  // namespace quant
