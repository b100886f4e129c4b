// Typed field access for parsed JSON, with errors that name the JSON path.
#include "core/base/json_fields.h"

#include "absl/strings/str_cat.h"

namespace quant {
namespace json_fields {
namespace {

const Json* Find(const Json& object, absl::string_view key) {
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

std::string FieldPath(absl::string_view path, absl::string_view key) {
  if (path.empty()) return std::string(key);
  return absl::StrCat(path, ".", key);
}

std::string IndexPath(absl::string_view path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

absl::Status ExpectObject(const Json& value, absl::string_view path) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an object, got ", value.type_name()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ComponentType(const Json& value,
                                          absl::string_view path) {
  if (absl::Status status = ExpectObject(value, path); !status.ok()) {
    return status;
  }
  return GetString(value, "type", path);
}

absl::StatusOr<std::string> GetString(const Json& object, absl::string_view key,
                                      absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": missing"));
  }
  if (!field->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        FieldPath(path, key), ": expected a string, got ", field->type_name()));
  }
  return field->get<std::string>();
}

absl::StatusOr<const Json*> GetArray(const Json& object, absl::string_view key,
                                     absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr || !field->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": expected an array"));
  }
  return field;
}

absl::StatusOr<const Json*> GetObject(const Json& object, absl::string_view key,
                                      absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": missing"));
  }
  if (!field->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(FieldPath(path, key),
                                                   ": expected an object, got ",
                                                   field->type_name()));
  }
  return field;
}

absl::StatusOr<int64_t> GetInt(const Json& object, absl::string_view key,
                               absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": missing"));
  }
  if (!field->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": expected an integer, got ",
                     field->type_name()));
  }
  return field->get<int64_t>();
}

absl::StatusOr<std::vector<std::string>> GetStringArrayOr(
    const Json& object, absl::string_view key, absl::string_view path) {
  std::vector<std::string> strings;
  const Json* field = Find(object, key);
  if (field == nullptr) return strings;
  if (!field->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        FieldPath(path, key), ": expected an array, got ", field->type_name()));
  }
  for (size_t i = 0; i < field->size(); ++i) {
    const Json& item = (*field)[i];
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(IndexPath(FieldPath(path, key), i),
                       ": expected a string, got ", item.type_name()));
    }
    strings.push_back(item.get<std::string>());
  }
  return strings;
}

absl::StatusOr<bool> GetBoolOr(const Json& object, absl::string_view key,
                               bool default_value, absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr) return default_value;
  if (!field->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": expected true or false, got ",
                     field->type_name()));
  }
  return field->get<bool>();
}

absl::StatusOr<int64_t> GetIntOr(const Json& object, absl::string_view key,
                                 int64_t default_value,
                                 absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr) return default_value;
  if (!field->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": expected an integer, got ",
                     field->type_name()));
  }
  return field->get<int64_t>();
}

absl::StatusOr<std::string> GetStringOr(const Json& object,
                                        absl::string_view key,
                                        absl::string_view default_value,
                                        absl::string_view path) {
  const Json* field = Find(object, key);
  if (field == nullptr) return std::string(default_value);
  if (!field->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        FieldPath(path, key), ": expected a string, got ", field->type_name()));
  }
  return field->get<std::string>();
}

absl::Status Unsupported(absl::string_view kind, absl::string_view type,
                         absl::string_view path) {
  return absl::UnimplementedError(
      absl::StrCat(path, ": unsupported ", kind, " type '", type, "'"));
}

}  // namespace json_fields
}  // namespace quant
