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

namespace {

// What one field must be: a test of its JSON kind and the words an error
// uses for it.
struct Kind {
  bool (Json::*is)() const noexcept;
  absl::string_view expected;
};
constexpr Kind kString{&Json::is_string, "a string"};
constexpr Kind kArray{&Json::is_array, "an array"};
constexpr Kind kObject{&Json::is_object, "an object"};
constexpr Kind kInteger{&Json::is_number_integer, "an integer"};
constexpr Kind kNumber{&Json::is_number, "a number"};
constexpr Kind kBoolean{&Json::is_boolean, "true or false"};

absl::Status WrongType(absl::string_view path, const Kind& kind,
                       const Json& value) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": expected ", kind.expected, ", got ", value.type_name()));
}

// The field when present (null counts as absent) and of `kind`; nullptr
// when absent.
absl::StatusOr<const Json*> Optional(const Json& object, absl::string_view key,
                                     absl::string_view path, const Kind& kind) {
  const Json* field = Find(object, key);
  if (field != nullptr && !(field->*kind.is)()) {
    return WrongType(FieldPath(path, key), kind, *field);
  }
  return field;
}

// The field, which must be present and of `kind`.
absl::StatusOr<const Json*> Required(const Json& object, absl::string_view key,
                                     absl::string_view path, const Kind& kind) {
  absl::StatusOr<const Json*> field = Optional(object, key, path, kind);
  if (field.ok() && *field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(FieldPath(path, key), ": missing"));
  }
  return field;
}

}  // namespace

absl::StatusOr<std::string> GetString(const Json& object, absl::string_view key,
                                      absl::string_view path) {
  absl::StatusOr<const Json*> field = Required(object, key, path, kString);
  if (!field.ok()) return field.status();
  return (*field)->get<std::string>();
}

absl::StatusOr<const Json*> GetArray(const Json& object, absl::string_view key,
                                     absl::string_view path) {
  return Required(object, key, path, kArray);
}

absl::StatusOr<const Json*> GetObject(const Json& object, absl::string_view key,
                                      absl::string_view path) {
  return Required(object, key, path, kObject);
}

absl::StatusOr<int64_t> GetInt(const Json& object, absl::string_view key,
                               absl::string_view path) {
  absl::StatusOr<const Json*> field = Required(object, key, path, kInteger);
  if (!field.ok()) return field.status();
  return (*field)->get<int64_t>();
}

absl::StatusOr<double> GetNumber(const Json& object, absl::string_view key,
                                 absl::string_view path) {
  absl::StatusOr<const Json*> field = Required(object, key, path, kNumber);
  if (!field.ok()) return field.status();
  return (*field)->get<double>();
}

absl::StatusOr<std::vector<std::string>> GetStringArrayOr(
    const Json& object, absl::string_view key, absl::string_view path) {
  std::vector<std::string> strings;
  absl::StatusOr<const Json*> field = Optional(object, key, path, kArray);
  if (!field.ok()) return field.status();
  if (*field == nullptr) return strings;
  for (size_t i = 0; i < (*field)->size(); ++i) {
    const Json& item = (**field)[i];
    if (!item.is_string()) {
      return WrongType(IndexPath(FieldPath(path, key), i), kString, item);
    }
    strings.push_back(item.get<std::string>());
  }
  return strings;
}

absl::StatusOr<bool> GetBoolOr(const Json& object, absl::string_view key,
                               bool default_value, absl::string_view path) {
  absl::StatusOr<const Json*> field = Optional(object, key, path, kBoolean);
  if (!field.ok()) return field.status();
  return *field == nullptr ? default_value : (*field)->get<bool>();
}

absl::StatusOr<int64_t> GetIntOr(const Json& object, absl::string_view key,
                                 int64_t default_value,
                                 absl::string_view path) {
  absl::StatusOr<const Json*> field = Optional(object, key, path, kInteger);
  if (!field.ok()) return field.status();
  return *field == nullptr ? default_value : (*field)->get<int64_t>();
}

absl::StatusOr<double> GetNumberOr(const Json& object, absl::string_view key,
                                   double default_value,
                                   absl::string_view path) {
  absl::StatusOr<const Json*> field = Optional(object, key, path, kNumber);
  if (!field.ok()) return field.status();
  return *field == nullptr ? default_value : (*field)->get<double>();
}

absl::StatusOr<std::string> GetStringOr(const Json& object,
                                        absl::string_view key,
                                        absl::string_view default_value,
                                        absl::string_view path) {
  absl::StatusOr<const Json*> field = Optional(object, key, path, kString);
  if (!field.ok()) return field.status();
  return *field == nullptr ? std::string(default_value)
                           : (*field)->get<std::string>();
}

absl::Status Unsupported(absl::string_view kind, absl::string_view type,
                         absl::string_view path) {
  return absl::UnimplementedError(
      absl::StrCat(path, ": unsupported ", kind, " type '", type, "'"));
}

const Json& MemberOrNull(const Json& object, absl::string_view key) {
  static const Json* const kNull = new Json();
  if (!object.is_object()) return *kNull;
  const auto it = object.find(std::string(key));
  return it == object.end() ? *kNull : *it;
}

std::string StringOrEmpty(const Json& object, absl::string_view key) {
  const Json& member = MemberOrNull(object, key);
  return member.is_string() ? member.get<std::string>() : "";
}

}  // namespace json_fields
}  // namespace quant
