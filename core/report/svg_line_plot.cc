// RenderLinePlot; see svg_line_plot.h.
#include "core/report/svg_line_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/report/html_escape.h"

namespace quant::report {
namespace {

// Room around the plotting area for the axes' labels and the legend.
constexpr double kLeft = 64;
constexpr double kRight = 150;
constexpr double kTop = 28;
constexpr double kBottom = 42;

std::string Num(double v) { return absl::StrFormat("%.6g", v); }
std::string Px(double v) { return absl::StrFormat("%.1f", v); }

bool Plottable(double y, bool log_y) {
  return std::isfinite(y) && (!log_y || y > 0.0);
}

// Tick values for [lo, hi]: about `count` round steps (1, 2 or 5 times a
// power of ten) on a linear axis, powers of ten on a log one.
std::vector<double> Ticks(double lo, double hi, bool log_y, int count) {
  std::vector<double> ticks;
  if (log_y) {
    for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi));
         e += 1.0) {
      ticks.push_back(std::pow(10.0, e));
    }
    return ticks;
  }
  const double raw = (hi - lo) / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9;
       t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

}  // namespace

std::string RenderLinePlot(const LinePlotOptions& options,
                           const std::vector<PlotSeries>& series,
                           const std::vector<ReferenceLine>& references) {
  const bool log_y = options.log_y;
  double x_lo = std::numeric_limits<double>::infinity();
  double x_hi = -x_lo;
  double y_lo = x_lo;
  double y_hi = -x_lo;
  int points = 0;
  for (const PlotSeries& s : series) {
    for (const PlotPoint& p : s.points) {
      if (!Plottable(p.y, log_y) || !std::isfinite(p.x)) continue;
      x_lo = std::min(x_lo, p.x);
      x_hi = std::max(x_hi, p.x);
      y_lo = std::min(y_lo, p.y);
      y_hi = std::max(y_hi, p.y);
      ++points;
    }
  }
  for (const ReferenceLine& r : references) {
    if (!Plottable(r.y, log_y) || points == 0) continue;
    y_lo = std::min(y_lo, r.y);
    y_hi = std::max(y_hi, r.y);
  }
  const double width = options.width;
  // Tall enough for the legend, a line per series.
  const double height =
      std::max<double>(options.height, kTop + 16.0 * series.size() + kBottom);
  std::string svg = absl::StrCat(
      "<svg class=\"plot\" data-plot=\"", HtmlEscape(options.id),
      "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", width, " ",
      height, "\" width=\"", width, "\" height=\"", height,
      "\" role=\"img\" aria-label=\"", HtmlEscape(options.title), "\">\n",
      "<text class=\"title\" x=\"", Px(kLeft), "\" y=\"18\">",
      HtmlEscape(options.title), "</text>\n");
  const double plot_w = width - kLeft - kRight;
  const double plot_h = height - kTop - kBottom;
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", Px(kLeft), "\" y=\"",
                  Px(kTop), "\" width=\"", Px(plot_w), "\" height=\"",
                  Px(plot_h), "\"/>\n");
  if (points == 0) {
    absl::StrAppend(&svg, "<text class=\"empty\" x=\"", Px(kLeft + plot_w / 2),
                    "\" y=\"", Px(kTop + plot_h / 2),
                    "\">no values to plot</text>\n</svg>\n");
    return svg;
  }
  // A little room above and below; a flat series gets a band around it.
  if (log_y) {
    y_lo /= 1.3;
    y_hi *= 1.3;
  } else {
    const double pad = y_hi > y_lo ? 0.06 * (y_hi - y_lo)
                                   : std::max(std::abs(y_hi) * 0.1, 1e-3);
    y_lo -= pad;
    y_hi += pad;
  }
  if (x_hi == x_lo) {
    x_lo -= 0.5;
    x_hi += 0.5;
  }
  const auto sx = [&](double x) {
    return kLeft + (x - x_lo) / (x_hi - x_lo) * plot_w;
  };
  const auto sy = [&](double y) {
    const double t = log_y ? (std::log10(y) - std::log10(y_lo)) /
                                 (std::log10(y_hi) - std::log10(y_lo))
                           : (y - y_lo) / (y_hi - y_lo);
    return kTop + (1.0 - t) * plot_h;
  };

  // Axes: y ticks with grid lines, x ticks at whole blocks.
  absl::StrAppend(&svg, "<g class=\"axis y\">\n");
  for (const double t : Ticks(y_lo, y_hi, log_y, 5)) {
    if (t < y_lo || t > y_hi) continue;
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Px(kLeft), "\" x2=\"",
                    Px(kLeft + plot_w), "\" y1=\"", Px(sy(t)), "\" y2=\"",
                    Px(sy(t)), "\"/><text x=\"", Px(kLeft - 6), "\" y=\"",
                    Px(sy(t) + 4), "\" text-anchor=\"end\">",
                    absl::StrFormat("%.3g", t), "</text>\n");
  }
  absl::StrAppend(&svg, "</g>\n<g class=\"axis x\">\n");
  const int x_step = std::max(1, static_cast<int>((x_hi - x_lo) / 16.0) + 1);
  for (double t = std::ceil(x_lo); t <= x_hi; t += x_step) {
    absl::StrAppend(&svg, "<text x=\"", Px(sx(t)), "\" y=\"",
                    Px(kTop + plot_h + 16), "\" text-anchor=\"middle\">",
                    Num(t), "</text>\n");
  }
  absl::StrAppend(&svg, "</g>\n<text class=\"label\" x=\"",
                  Px(kLeft + plot_w / 2), "\" y=\"", Px(height - 6),
                  "\" text-anchor=\"middle\">", HtmlEscape(options.x_label),
                  "</text>\n<text class=\"label\" transform=\"translate(14,",
                  Px(kTop + plot_h / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">",
                  HtmlEscape(options.y_label), "</text>\n");

  for (const ReferenceLine& r : references) {
    if (!Plottable(r.y, log_y)) continue;
    absl::StrAppend(
        &svg, "<g class=\"reference\"><line x1=\"", Px(kLeft), "\" x2=\"",
        Px(kLeft + plot_w), "\" y1=\"", Px(sy(r.y)), "\" y2=\"", Px(sy(r.y)),
        "\"/><text x=\"", Px(kLeft + plot_w - 4), "\" y=\"", Px(sy(r.y) - 4),
        "\" text-anchor=\"end\">", HtmlEscape(r.label), "</text></g>\n");
  }

  double legend_y = kTop + 10;
  for (const PlotSeries& s : series) {
    const std::string color = HtmlEscape(s.color);
    absl::StrAppend(&svg, "<g class=\"series\" data-series=\"",
                    HtmlEscape(s.key), "\">\n");
    std::string path;
    for (const PlotPoint& p : s.points) {
      if (!Plottable(p.y, log_y) || !std::isfinite(p.x)) continue;
      absl::StrAppend(&path, path.empty() ? "M" : " L", Px(sx(p.x)), ",",
                      Px(sy(p.y)));
    }
    if (!path.empty()) {
      absl::StrAppend(&svg, "<path d=\"", path, "\" stroke=\"", color,
                      "\" fill=\"none\" stroke-width=\"1.5\"",
                      s.dashed ? " stroke-dasharray=\"5,3\"" : "", "/>\n");
    }
    for (const PlotPoint& p : s.points) {
      if (!Plottable(p.y, log_y) || !std::isfinite(p.x)) continue;
      const std::string circle = absl::StrCat(
          "<circle class=\"point", p.marked ? " marked" : "", "\" data-x=\"",
          Num(p.x), "\" data-y=\"", Num(p.y), "\" cx=\"", Px(sx(p.x)),
          "\" cy=\"", Px(sy(p.y)), "\" r=\"", p.marked ? "4.5" : "3",
          "\" fill=\"", s.dashed ? "white" : color, "\" stroke=\"",
          p.marked ? "#d00" : color, "\"><title>", HtmlEscape(p.tooltip),
          "</title></circle>");
      if (p.link.empty()) {
        absl::StrAppend(&svg, circle, "\n");
      } else {
        absl::StrAppend(&svg, "<a href=\"", HtmlEscape(p.link), "\">", circle,
                        "</a>\n");
      }
    }
    absl::StrAppend(&svg, "</g>\n");
    // Legend entry.
    const double lx = kLeft + plot_w + 12;
    absl::StrAppend(&svg, "<g class=\"legend\"><line x1=\"", Px(lx), "\" x2=\"",
                    Px(lx + 22), "\" y1=\"", Px(legend_y), "\" y2=\"",
                    Px(legend_y), "\" stroke=\"", color,
                    "\" stroke-width=\"2\"",
                    s.dashed ? " stroke-dasharray=\"5,3\"" : "", "/><text x=\"",
                    Px(lx + 28), "\" y=\"", Px(legend_y + 4), "\">",
                    HtmlEscape(s.label), "</text></g>\n");
    legend_y += 16;
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace quant::report
