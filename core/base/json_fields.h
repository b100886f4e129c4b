// Typed, non-throwing access to the fields of parsed JSON documents
// (tokenizer.json, stored job specs; parse them with strict_json.h). Every
// error names the JSON path of the bad field, e.g.
// "pre_tokenizer.pretokenizers[0].pattern: expected a string".
#ifndef QUANT_CORE_BASE_JSON_FIELDS_H_
#define QUANT_CORE_BASE_JSON_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace json_fields {

using Json = nlohmann::json;

// "path.key", or "key" when path is empty.
std::string FieldPath(absl::string_view path, absl::string_view key);
// "path[index]".
std::string IndexPath(absl::string_view path, size_t index);

// Fails unless `value` is an object.
absl::Status ExpectObject(const Json& value, absl::string_view path);

// The "type" string of a component object.
absl::StatusOr<std::string> ComponentType(const Json& value,
                                          absl::string_view path);

// Required fields.
absl::StatusOr<std::string> GetString(const Json& object, absl::string_view key,
                                      absl::string_view path);
absl::StatusOr<const Json*> GetArray(const Json& object, absl::string_view key,
                                     absl::string_view path);
absl::StatusOr<const Json*> GetObject(const Json& object, absl::string_view key,
                                      absl::string_view path);
absl::StatusOr<int64_t> GetInt(const Json& object, absl::string_view key,
                               absl::string_view path);
// Any JSON number, integer or not.
absl::StatusOr<double> GetNumber(const Json& object, absl::string_view key,
                                 absl::string_view path);

// Optional fields: absent or null gives the default; another type fails.
absl::StatusOr<bool> GetBoolOr(const Json& object, absl::string_view key,
                               bool default_value, absl::string_view path);
absl::StatusOr<int64_t> GetIntOr(const Json& object, absl::string_view key,
                                 int64_t default_value, absl::string_view path);
absl::StatusOr<double> GetNumberOr(const Json& object, absl::string_view key,
                                   double default_value,
                                   absl::string_view path);
// Absent, null or "" all give "".
absl::StatusOr<std::string> GetStringOr(const Json& object,
                                        absl::string_view key,
                                        absl::string_view default_value,
                                        absl::string_view path);

// Absent or null gives {}; otherwise an array of strings.
absl::StatusOr<std::vector<std::string>> GetStringArrayOr(
    const Json& object, absl::string_view key, absl::string_view path);

// Lenient readers for documents that are read, not trusted (a manifest of
// any shape still renders): a member of `object`, or null when `object` is
// not an object or lacks it; a string member, or "" when it is absent or not
// a string.
const Json& MemberOrNull(const Json& object, absl::string_view key);
std::string StringOrEmpty(const Json& object, absl::string_view key);

// An unsupported component: "path: unsupported <kind> type 'Name'".
absl::Status Unsupported(absl::string_view kind, absl::string_view type,
                         absl::string_view path);

}  // namespace json_fields
}  // namespace quant

#endif  // QUANT_CORE_BASE_JSON_FIELDS_H_
