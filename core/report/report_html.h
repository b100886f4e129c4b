// report.html: the release report a person reads, rendered from a packed
// checkpoint's audit.json and manifest.json. One self-contained file: inline
// SVG and CSS and a few lines of inline script that sort the table, nothing
// fetched from the network. From the top: the verdict and the gates; held-out
// relative output error by depth, one line per layer type, the method
// against RTN; gain over RTN and flattery by depth; the Hessian diagnostics
// (T/K, rho_rms against 1/sqrt(T), dead channels) with rank-deficient
// layers marked; the flagged layers, linked to their rows; the layers kept
// unquantized; the recipe, the calibration set and the provenance; the
// whole per-layer table, sortable.
//
// The same two files always give the same bytes, so the finalize's
// report.html, `quantctl report --html` and quantd's /jobs/ID/report agree.
#ifndef QUANT_CORE_REPORT_REPORT_HTML_H_
#define QUANT_CORE_REPORT_REPORT_HTML_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace quant::report {

// The name the page has inside a packed checkpoint.
inline constexpr char kReportFileName[] = "report.html";

// InvalidArgument naming the field (e.g. "audit.json: layers[3].name:
// missing") when either document lacks what the page shows.
absl::StatusOr<std::string> RenderReportHtml(const nlohmann::json& audit,
                                             const nlohmann::json& manifest);

}  // namespace quant::report

#endif  // QUANT_CORE_REPORT_REPORT_HTML_H_
