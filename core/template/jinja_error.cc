// Errors of the Jinja engine; see jinja_error.h.
#include "core/template/jinja_error.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace quant::jinja {
namespace {

// Payload that marks an unplaced error; its message is still bare.
constexpr absl::string_view kUnplacedPayload = "quant.jinja/unplaced";

absl::Status WithCode(absl::StatusCode code, absl::string_view message) {
  return absl::Status(code, message);
}

absl::Status Make(absl::StatusCode code, SourcePos pos,
                  absl::string_view message) {
  if (pos.line == 0) {
    absl::Status status = WithCode(code, message);
    status.SetPayload(kUnplacedPayload, absl::Cord());
    return status;
  }
  return WithCode(code, absl::StrCat("chat template ", pos.line, ":",
                                     pos.column, ": ", message));
}

bool IsUnplaced(const absl::Status& status) {
  return status.GetPayload(kUnplacedPayload).has_value();
}

}  // namespace

absl::Status TemplateError(SourcePos pos, absl::string_view message) {
  return Make(absl::StatusCode::kInvalidArgument, pos, message);
}

absl::Status UnplacedError(absl::string_view message) {
  return TemplateError(SourcePos{}, message);
}

absl::Status RaisedError(absl::string_view message) {
  return UnplacedError(absl::StrCat("raise_exception: ", message));
}

absl::Status LimitError(SourcePos pos, absl::string_view message) {
  return Make(absl::StatusCode::kResourceExhausted, pos, message);
}

absl::Status PlaceError(absl::Status status, SourcePos pos) {
  if (status.ok() || pos.line == 0 || !IsUnplaced(status)) return status;
  return Make(status.code(), pos, status.message());
}

absl::Status FinishError(absl::Status status) {
  if (status.ok() || !IsUnplaced(status)) return status;
  return WithCode(status.code(),
                  absl::StrCat("chat template: ", status.message()));
}

}  // namespace quant::jinja
