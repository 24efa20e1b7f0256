// Implements: line charts of training metrics as images (OpenCV only, no plotting library): data
// series -> axes with "nice" ticks -> a BGR image with tick labels, axis labels and a legend; and
// the charts `detseg plot` draws from a run's metrics.jsonl records.
#pragma once

#include <opencv2/core.hpp>

#include <string>
#include <utility>
#include <vector>

#include "detseg/io/metrics_jsonl.h"

namespace detseg {

struct PlotSeries {
  std::string name;       // legend entry
  std::vector<double> x;  // ascending steps
  std::vector<double> y;  // NaN/Inf values are gaps
  bool markers = false;   // also mark each point (sparse series such as evaluations)
  cv::Scalar color = cv::Scalar(-1, -1, -1);  // BGR; negative: series_color(its index)
  int thickness = 2;
  bool in_legend = true;
};

struct PlotOptions {
  int width = 900;
  int height = 500;
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  // Fixed axis ranges (both ends used as the outer ticks) instead of ones fitted to the data, when
  // lo < hi.
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  bool legend_bottom_left = false;  // the legend's corner: top-right (default) or bottom-left
};

// Evenly spaced round tick values (steps of 1, 2 or 5 x 10^k) covering [lo, hi] with about
// `target` intervals: the first tick is <= lo and the last >= hi. lo == hi gets a range around it.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// Data -> pixel mapping of a chart: the data ranges (the outer ticks) onto the plot area.
struct AxisMapping {
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  cv::Rect area;  // plot area in image pixels; x_min maps to its left column, y_max to its top row
  std::vector<double> x_ticks, y_ticks;
  cv::Point2d to_pixel(double x, double y) const;
  cv::Point to_pixel_rounded(double x, double y) const;
};

// The mapping render_plot uses for these series (finite points only) at this size. Throws Error
// when no series has a finite point.
AxisMapping fit_axes(const std::vector<PlotSeries>& series, const PlotOptions& options);

// A white chart: frame, grid, tick labels, axis labels, title, one coloured line per series and a
// legend in the top-right corner.
cv::Mat render_plot(const std::vector<PlotSeries>& series, const PlotOptions& options);

// The colour of series i (BGR, matplotlib's tab10 cycle).
cv::Scalar series_color(size_t index);

// One chart of a run: file name (without .png), title, y label and its series.
struct RunChart {
  std::string name;
  std::string title;
  std::string y_label;
  std::vector<PlotSeries> series;
};

// The charts of a run: "loss" (train keys ending in "loss", then eval losses), "learning_rate",
// "grad_norm", "eval_ap" (AP, AP50, AP75 or mIoU of eval records), each only when it has a finite
// value. Records with split "eval" are evaluations, every other split is training.
std::vector<RunChart> run_charts(const std::vector<MetricsRecord>& records);

// run_charts, rendered: (name, image) pairs.
std::vector<std::pair<std::string, cv::Mat>> render_run_charts(const std::vector<MetricsRecord>& records,
                                                               const PlotOptions& options = {});

// Series of one metric: (step, value) of every eval record (`eval`) or every other record that
// has `name`, sorted by step; a step logged twice (a resumed run) keeps the later record.
PlotSeries metric_series(const std::vector<MetricsRecord>& records, bool eval, const std::string& name);

// `detseg plot`: reads run_dir/metrics.jsonl and run_dir/eval/metrics.jsonl (either may be
// missing, not both: Error naming both paths; a malformed line: Error naming file:line) and writes
// out_dir/<chart>.png for each chart of render_run_charts. Returns the paths written.
std::vector<std::string> plot_run(const std::string& run_dir, const std::string& out_dir,
                                  const PlotOptions& options = {});

}  // namespace detseg
