// Errors of the Jinja engine. They are absl::Status values that already
// carry their final message ("chat template L:C: message"), except those
// raised where the template position is not known (inside a filter, a
// method, a value conversion): those are "unplaced" until the evaluator
// gives them the position of the node that failed (PlaceError), so that the
// innermost node names the error, as in the reference implementation.
#ifndef QUANT_CORE_TEMPLATE_JINJA_ERROR_H_
#define QUANT_CORE_TEMPLATE_JINJA_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/template/jinja_value.h"

namespace quant::jinja {

// InvalidArgument "chat template L:C: message"; unplaced when `pos` is
// unknown (line 0).
absl::Status TemplateError(SourcePos pos, absl::string_view message);
// An error whose position the caller adds later.
absl::Status UnplacedError(absl::string_view message);
// raise_exception(message) called by the template (unplaced).
absl::Status RaisedError(absl::string_view message);
// ResourceExhausted: a recursion depth, size or step limit was hit.
absl::Status LimitError(SourcePos pos, absl::string_view message);

// `status` with `pos` added when it is unplaced; otherwise unchanged.
absl::Status PlaceError(absl::Status status, SourcePos pos);
// The status the public API returns: an error still unplaced becomes
// "chat template: message".
absl::Status FinishError(absl::Status status);

}  // namespace quant::jinja

#endif  // QUANT_CORE_TEMPLATE_JINJA_ERROR_H_
