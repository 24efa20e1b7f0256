// Implements: the line charts declared in plot.h.
#include "detseg/viz/plot.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {
namespace {

// Room around the plot area for the title and y label (top), tick labels (left, bottom) and the
// x label (bottom).
constexpr int kLeft = 80, kRight = 20, kTop = 48, kBottom = 46;
constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr double kTickFontScale = 0.4;
constexpr double kLabelFontScale = 0.5;

// The tick spacing: 1, 2 or 5 x 10^k, the smallest at least range / target.
double nice_step(double range, int target) {
  const double raw = range / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  return 10 * magnitude;
}

std::string format_tick(double value, double step, double largest) {
  char buf[32];
  if (value == 0) return "0";
  if (largest >= 1e6 || step < 1e-4) {
    std::snprintf(buf, sizeof(buf), "%.3g", value);
  } else {
    const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  }
  return buf;
}

void put_text(cv::Mat& image, const std::string& text, cv::Point origin, double scale,
              const cv::Scalar& color = cv::Scalar(0, 0, 0)) {
  cv::putText(image, text, origin, kFont, scale, color, 1, cv::LINE_AA);
}

cv::Size text_size(const std::string& text, double scale) {
  int baseline = 0;
  return cv::getTextSize(text, kFont, scale, 1, &baseline);
}

bool finite_point(const PlotSeries& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

cv::Scalar color_of(const std::vector<PlotSeries>& series, size_t i) {
  return series[i].color[0] >= 0 ? series[i].color : series_color(i);
}

void draw_legend(cv::Mat& image, const std::vector<PlotSeries>& series, const cv::Rect& area, bool bottom_left) {
  int text_width = 0, rows = 0;
  for (const auto& s : series)
    if (s.in_legend) {
      text_width = std::max(text_width, text_size(s.name, kTickFontScale).width);
      ++rows;
    }
  if (rows == 0) return;
  const int row = 16;
  const int width = text_width + 40;
  const int height = row * rows + 8;
  const cv::Rect box = bottom_left ? cv::Rect(area.x + 8, area.y + area.height - height - 8, width, height)
                                   : cv::Rect(area.x + area.width - width - 8, area.y + 8, width, height);
  cv::rectangle(image, box, cv::Scalar(255, 255, 255), cv::FILLED);
  cv::rectangle(image, box, cv::Scalar(160, 160, 160), 1);
  int shown = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i].in_legend) continue;
    const int y = box.y + 4 + row * shown++ + row / 2;
    cv::line(image, {box.x + 6, y}, {box.x + 28, y}, color_of(series, i), series[i].thickness, cv::LINE_8);
    put_text(image, series[i].name, {box.x + 34, y + 4}, kTickFontScale);
  }
}

}  // namespace

cv::Scalar series_color(size_t index) {
  // matplotlib's tab10, as BGR.
  static const cv::Scalar kColors[] = {
      {180, 119, 31}, {14, 127, 255}, {44, 160, 44},   {40, 39, 214},  {189, 103, 148},
      {75, 86, 140},  {194, 119, 227}, {127, 127, 127}, {34, 189, 188}, {207, 190, 23}};
  return kColors[index % 10];
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  DETSEG_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "nice_ticks: bad range [", lo, ", ", hi, "]");
  if (hi - lo <= 1e-12 * std::max(1.0, std::abs(hi))) {
    // A flat series: centre it in a range of its own size (or 1 around zero).
    const double pad = lo != 0 ? std::abs(lo) * 0.5 : 0.5;
    lo -= pad;
    hi += pad;
  }
  const double step = nice_step(hi - lo, target);
  // Ticks are integer multiples of the step, so 0.6 prints as 0.6 and not 0.6000000000000001.
  const auto first = static_cast<int64_t>(std::floor(lo / step + 1e-9));
  const auto last = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int64_t k = first; k <= last; ++k) ticks.push_back(static_cast<double>(k) * step);
  return ticks;
}

cv::Point2d AxisMapping::to_pixel(double x, double y) const {
  const double fx = (x - x_min) / (x_max - x_min);
  const double fy = (y_max - y) / (y_max - y_min);
  return {area.x + fx * (area.width - 1), area.y + fy * (area.height - 1)};
}

cv::Point AxisMapping::to_pixel_rounded(double x, double y) const {
  const cv::Point2d p = to_pixel(x, y);
  return {static_cast<int>(std::lround(p.x)), static_cast<int>(std::lround(p.y))};
}

AxisMapping fit_axes(const std::vector<PlotSeries>& series, const PlotOptions& options) {
  DETSEG_CHECK(options.width >= kLeft + kRight + 50 && options.height >= kTop + kBottom + 50, "plot size ",
               options.width, "x", options.height, " is too small (at least ", kLeft + kRight + 50, "x",
               kTop + kBottom + 50, ")");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_lo = kInf, x_hi = -kInf, y_lo = kInf, y_hi = -kInf;
  for (const auto& s : series) {
    DETSEG_CHECK(s.x.size() == s.y.size(), "plot series '", s.name, "' has ", s.x.size(), " x values and ",
                 s.y.size(), " y values");
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_point(s, i)) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  DETSEG_CHECK(x_lo <= x_hi, "plot '", options.title, "': no finite values to draw");
  AxisMapping m;
  m.area = cv::Rect(kLeft, kTop, options.width - kLeft - kRight, options.height - kTop - kBottom);
  m.x_ticks = options.x_lo < options.x_hi ? nice_ticks(options.x_lo, options.x_hi, 5) : nice_ticks(x_lo, x_hi, 6);
  m.y_ticks = options.y_lo < options.y_hi ? nice_ticks(options.y_lo, options.y_hi, 5) : nice_ticks(y_lo, y_hi, 5);
  m.x_min = m.x_ticks.front();
  m.x_max = m.x_ticks.back();
  m.y_min = m.y_ticks.front();
  m.y_max = m.y_ticks.back();
  return m;
}

cv::Mat render_plot(const std::vector<PlotSeries>& series, const PlotOptions& options) {
  const AxisMapping m = fit_axes(series, options);
  cv::Mat image(options.height, options.width, CV_8UC3, cv::Scalar(255, 255, 255));
  const cv::Rect& a = m.area;
  const cv::Scalar grid(225, 225, 225), black(0, 0, 0);

  // Grid and tick labels.
  double x_largest = std::max(std::abs(m.x_min), std::abs(m.x_max));
  double y_largest = std::max(std::abs(m.y_min), std::abs(m.y_max));
  const double x_step = m.x_ticks.size() > 1 ? m.x_ticks[1] - m.x_ticks[0] : 1;
  const double y_step = m.y_ticks.size() > 1 ? m.y_ticks[1] - m.y_ticks[0] : 1;
  for (double t : m.x_ticks) {
    const int px = m.to_pixel_rounded(t, m.y_min).x;
    cv::line(image, {px, a.y}, {px, a.y + a.height - 1}, grid, 1);
    cv::line(image, {px, a.y + a.height - 1}, {px, a.y + a.height + 3}, black, 1);
    const std::string label = format_tick(t, x_step, x_largest);
    put_text(image, label, {px - text_size(label, kTickFontScale).width / 2, a.y + a.height + 17},
             kTickFontScale);
  }
  for (double t : m.y_ticks) {
    const int py = m.to_pixel_rounded(m.x_min, t).y;
    cv::line(image, {a.x, py}, {a.x + a.width - 1, py}, grid, 1);
    cv::line(image, {a.x - 4, py}, {a.x, py}, black, 1);
    const std::string label = format_tick(t, y_step, y_largest);
    put_text(image, label, {a.x - 8 - text_size(label, kTickFontScale).width, py + 4}, kTickFontScale);
  }

  // Series: segments between consecutive finite points; a gap where a value is missing.
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& s = series[k];
    const cv::Scalar color = color_of(series, k);
    bool have_previous = false;
    cv::Point previous;
    int finite_points = 0;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_point(s, i)) {
        have_previous = false;
        continue;
      }
      const cv::Point p = m.to_pixel_rounded(s.x[i], s.y[i]);
      if (have_previous) cv::line(image, previous, p, color, s.thickness, cv::LINE_8);
      if (s.markers) cv::circle(image, p, 3, color, cv::FILLED, cv::LINE_8);
      previous = p;
      have_previous = true;
      ++finite_points;
    }
    if (finite_points == 1 && !s.markers) cv::circle(image, previous, 3, color, cv::FILLED, cv::LINE_8);
  }

  cv::rectangle(image, a, black, 1);
  if (!options.title.empty()) {
    const cv::Size size = text_size(options.title, kLabelFontScale);
    put_text(image, options.title, {a.x + (a.width - size.width) / 2, 20}, kLabelFontScale);
  }
  if (!options.y_label.empty()) put_text(image, options.y_label, {8, a.y - 10}, kTickFontScale);
  if (!options.x_label.empty()) {
    const cv::Size size = text_size(options.x_label, kTickFontScale);
    put_text(image, options.x_label, {a.x + (a.width - size.width) / 2, options.height - 8}, kTickFontScale);
  }
  draw_legend(image, series, a, options.legend_bottom_left);
  return image;
}

PlotSeries metric_series(const std::vector<MetricsRecord>& records, bool eval, const std::string& name) {
  std::map<int64_t, double> by_step;  // the later record of a step wins
  for (const auto& r : records) {
    if ((r.split == "eval") != eval) continue;
    for (const auto& [key, value] : r.values)
      if (key == name) by_step[r.step] = value;
  }
  PlotSeries s;
  s.name = eval ? "eval " + name : name;
  s.markers = eval;
  for (const auto& [step, value] : by_step) {
    s.x.push_back(static_cast<double>(step));
    s.y.push_back(value);
  }
  return s;
}

std::vector<RunChart> run_charts(const std::vector<MetricsRecord>& records) {
  // Metric names in order of first appearance, per side.
  std::vector<std::string> train_names, eval_names;
  for (const auto& r : records) {
    auto& names = r.split == "eval" ? eval_names : train_names;
    for (const auto& [key, value] : r.values)
      if (std::find(names.begin(), names.end(), key) == names.end()) names.push_back(key);
  }
  auto has_data = [](const PlotSeries& s) {
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.y[i])) return true;
    return false;
  };
  auto is_loss = [](const std::string& n) { return n.size() >= 4 && n.compare(n.size() - 4, 4, "loss") == 0; };
  std::vector<RunChart> charts;
  auto add = [&](RunChart chart) {
    auto& s = chart.series;
    s.erase(std::remove_if(s.begin(), s.end(), [&](const PlotSeries& x) { return !has_data(x); }), s.end());
    if (!s.empty()) charts.push_back(std::move(chart));
  };

  RunChart losses{"loss", "Losses", "loss", {}};
  for (const auto& n : train_names)
    if (is_loss(n)) losses.series.push_back(metric_series(records, false, n));
  for (const auto& n : eval_names)
    if (is_loss(n)) losses.series.push_back(metric_series(records, true, n));
  add(std::move(losses));
  add({"learning_rate", "Learning rate", "learning rate", {metric_series(records, false, "learning_rate")}});
  add({"grad_norm", "Gradient global norm (before clipping)", "norm", {metric_series(records, false, "grad_norm")}});
  RunChart eval{"eval_ap", "Evaluation", "AP", {}};
  for (const char* n : {"AP", "AP50", "AP75", "mIoU"})
    if (std::find(eval_names.begin(), eval_names.end(), n) != eval_names.end())
      eval.series.push_back(metric_series(records, true, n));
  add(std::move(eval));
  return charts;
}

std::vector<std::pair<std::string, cv::Mat>> render_run_charts(const std::vector<MetricsRecord>& records,
                                                               const PlotOptions& options) {
  std::vector<std::pair<std::string, cv::Mat>> out;
  for (const RunChart& chart : run_charts(records)) {
    PlotOptions o = options;
    o.title = chart.title;
    o.y_label = chart.y_label;
    out.emplace_back(chart.name, render_plot(chart.series, o));
  }
  return out;
}

std::vector<std::string> plot_run(const std::string& run_dir, const std::string& out_dir,
                                  const PlotOptions& options) {
  DETSEG_CHECK(is_directory(run_dir), run_dir, ": run directory not found");
  const std::string train_log = run_dir + "/metrics.jsonl";
  const std::string eval_log = run_dir + "/eval/metrics.jsonl";
  std::vector<MetricsRecord> records;
  bool found = false;
  for (const std::string& path : {train_log, eval_log}) {
    if (!file_exists(path)) continue;
    found = true;
    std::vector<MetricsRecord> more = read_metrics_jsonl(path);
    // Records of eval/metrics.jsonl are evaluations whatever their split says.
    if (path == eval_log)
      for (auto& r : more) r.split = "eval";
    records.insert(records.end(), more.begin(), more.end());
  }
  DETSEG_CHECK(found, run_dir, ": no metrics log (looked for ", train_log, " and ", eval_log,
               "); is this a model dir written by `detseg train` or `detseg eval --continuous`?");
  const auto charts = render_run_charts(records, options);
  DETSEG_CHECK(!charts.empty(), run_dir, ": the metrics logs hold no values to plot (", records.size(), " records)");
  // No chart replaces a log it was drawn from (--out pointing into the logs, a chart name linked to one).
  const std::vector<CommandInput> inputs = {{train_log, "the training metrics log"},
                                            {eval_log, "the evaluation metrics log"}};
  check_output_is_not_an_input(out_dir, "--out", inputs);
  DETSEG_CONFIG_CHECK(!file_exists(out_dir) || is_directory(out_dir), "--out ", out_dir, ": is a file; give a folder");
  std::vector<std::string> paths;
  for (const auto& chart : charts) paths.push_back(out_dir + "/" + chart.first + ".png");
  check_outputs_are_not_inputs(paths, "--out", inputs);
  make_directories(out_dir);
  for (size_t i = 0; i < charts.size(); ++i) {
    std::vector<uchar> png;
    DETSEG_CHECK(cv::imencode(".png", charts[i].second, png), paths[i], ": the chart could not be encoded as PNG");
    write_file_atomic(paths[i], std::string(png.begin(), png.end()), Durability::kAtomicOnly);
  }
  return paths;
}

}  // namespace detseg
