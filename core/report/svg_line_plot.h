// A line plot as inline SVG, for the report page: one line per series over
// integer x (a decoder block's depth), a point per value that links to its
// row, optional horizontal reference lines, linear or log y. No script and
// nothing from the network; the page stays one self-contained file.
//
// The markup is meant to be checked as well as seen: the plot is
// <svg data-plot=ID>, each series <g class="series" data-series=KEY>, each
// point <circle class="point" data-x=X data-y=Y>.
#ifndef QUANT_CORE_REPORT_SVG_LINE_PLOT_H_
#define QUANT_CORE_REPORT_SVG_LINE_PLOT_H_

#include <string>
#include <vector>

namespace quant::report {

struct PlotPoint {
  double x = 0.0;
  double y = 0.0;
  std::string tooltip;  // shown on hover (plain text)
  std::string link;     // "#row-id", or empty
  bool marked = false;  // drawn with a red ring (e.g. rank-deficient)
};

struct PlotSeries {
  std::string key;    // data-series, e.g. "q_proj/method"
  std::string label;  // the legend's text
  std::string color;  // a CSS color
  bool dashed = false;
  std::vector<PlotPoint> points;  // by increasing x
};

struct ReferenceLine {
  double y = 0.0;
  std::string label;
};

struct LinePlotOptions {
  std::string id;  // data-plot
  std::string title;
  std::string x_label;
  std::string y_label;
  // Log y: for values that span decades (token counts). Points at or below
  // 0 are left out.
  bool log_y = false;
  int width = 900;
  int height = 300;  // at least: grows with the legend
};

// Points whose y is not finite are left out (and so are non-positive ones
// on a log axis). A plot with no point says so inside its frame.
std::string RenderLinePlot(const LinePlotOptions& options,
                           const std::vector<PlotSeries>& series,
                           const std::vector<ReferenceLine>& references = {});

}  // namespace quant::report

#endif  // QUANT_CORE_REPORT_SVG_LINE_PLOT_H_
