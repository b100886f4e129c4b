// Escaping text for HTML: every string the report takes from a checkpoint
// or a recipe (layer names, paths, reasons) is untrusted and goes through
// this before it reaches the page.
#ifndef QUANT_CORE_REPORT_HTML_ESCAPE_H_
#define QUANT_CORE_REPORT_HTML_ESCAPE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace quant::report {

// `text` with & < > " ' replaced by character references, so it is safe as
// element content and inside a quoted attribute value.
std::string HtmlEscape(absl::string_view text);

}  // namespace quant::report

#endif  // QUANT_CORE_REPORT_HTML_ESCAPE_H_
