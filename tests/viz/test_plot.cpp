// Charts for `detseg plot`: tick choice, the data -> pixel mapping (checked on rendered pixels),
// which metrics go on which chart, PNG output and the errors for missing or malformed logs.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "detseg/core/error.h"
#include "detseg/io/metrics_jsonl.h"
#include "detseg/viz/plot.h"

namespace fs = std::filesystem;

namespace detseg {
namespace {

std::string fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("detseg_plot_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

cv::Vec3b color_of(size_t index) {
  cv::Scalar c = series_color(index);
  return cv::Vec3b(static_cast<uchar>(c[0]), static_cast<uchar>(c[1]), static_cast<uchar>(c[2]));
}

TEST(Plot, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 100, 6), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  // 0.074 / 5 = 0.0148 -> step 0.02; outer ticks enclose the data.
  std::vector<double> t = nice_ticks(0.013, 0.087, 5);
  ASSERT_EQ(t.size(), 6u);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_DOUBLE_EQ(t[i], 0.02 * static_cast<double>(i));
  // A flat series gets a range of its own size around it: [1.5, 4.5] -> ticks 1..5.
  EXPECT_EQ(nice_ticks(3, 3, 5), (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_EQ(nice_ticks(120, 1000, 6), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
}

TEST(Plot, AxisMappingLandsOnExpectedPixels) {
  PlotSeries s{"y", {0, 50, 100}, {0, 0.5, 1}, false};
  PlotOptions o;  // 900 x 500: plot area x 80..879, y 48..453 (margins 80/20/48/46)
  const AxisMapping m = fit_axes({s}, o);
  EXPECT_EQ(m.area, cv::Rect(80, 48, 800, 406));
  EXPECT_DOUBLE_EQ(m.x_min, 0);
  EXPECT_DOUBLE_EQ(m.x_max, 100);
  EXPECT_DOUBLE_EQ(m.y_min, 0);
  EXPECT_DOUBLE_EQ(m.y_max, 1);
  EXPECT_EQ(m.to_pixel(0, 0), cv::Point2d(80, 453));    // bottom-left corner
  EXPECT_EQ(m.to_pixel(100, 1), cv::Point2d(879, 48));  // top-right corner
  EXPECT_EQ(m.to_pixel(50, 0.5), cv::Point2d(479.5, 250.5));
  EXPECT_EQ(m.to_pixel_rounded(50, 0.5), cv::Point(480, 251));

  cv::Mat image = render_plot({s}, o);
  ASSERT_EQ(image.size(), cv::Size(900, 500));
  ASSERT_EQ(image.type(), CV_8UC3);
  // The data points are drawn in the series colour...
  EXPECT_EQ(image.at<cv::Vec3b>(251, 480), color_of(0));
  EXPECT_EQ(image.at<cv::Vec3b>(452, 81), color_of(0));  // (0, 0) itself lies under the frame
  // ...and so is the line between them (within a pixel of (25, 0.25) -> (279.75, 351.75)).
  bool near_line = false;
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) near_line = near_line || image.at<cv::Vec3b>(352 + dy, 280 + dx) == color_of(0);
  EXPECT_TRUE(near_line);
  // Away from the line and the grid the plot area is white: (75, 0.25) -> (679, 352).
  EXPECT_EQ(image.at<cv::Vec3b>(352, 679), cv::Vec3b(255, 255, 255));
  // The frame is black at the area's corner.
  EXPECT_EQ(image.at<cv::Vec3b>(48, 80), cv::Vec3b(0, 0, 0));
  // Tick labels are drawn left of the area (dark pixels somewhere in the label column).
  cv::Mat labels = image(cv::Rect(10, 40, 60, 420));
  int dark = 0;
  for (auto it = labels.begin<cv::Vec3b>(); it != labels.end<cv::Vec3b>(); ++it)
    dark += (*it)[0] < 128 && (*it)[1] < 128 && (*it)[2] < 128;
  EXPECT_GT(dark, 50);
}

TEST(Plot, GapsAndErrors) {
  // A NaN value is a gap; an all-NaN chart has nothing to draw.
  PlotSeries gap{"g", {0, 1, 2}, {0, std::nan(""), 1}, false};
  EXPECT_NO_THROW(render_plot({gap}, PlotOptions{}));
  PlotSeries empty{"e", {0, 1}, {std::nan(""), INFINITY}, false};
  EXPECT_THROW(render_plot({empty}, PlotOptions{}), Error);
  PlotSeries ragged{"r", {0, 1}, {0}, false};
  EXPECT_THROW(render_plot({ragged}, PlotOptions{}), Error);
  PlotOptions tiny;
  tiny.width = 100;
  EXPECT_THROW(render_plot({gap}, tiny), Error);
}

std::vector<MetricsRecord> sample_records() {
  std::vector<MetricsRecord> records;
  for (int64_t step = 10; step <= 100; step += 10) {
    MetricsRecord r;
    r.step = step;
    r.split = "train";
    const double s = static_cast<double>(step);
    r.values = {{"total_loss", 2.0 / s}, {"cls_loss", 1.0 / s},   {"box_loss", 1.0 / s},
                {"num_positives", 7},    {"l2_loss", 0.0},         {"learning_rate", 0.01 * s / 100},
                {"grad_norm", 3.0}};
    records.push_back(r);
  }
  for (int64_t step : {50, 100}) {
    MetricsRecord r;
    r.step = step;
    r.split = "eval";
    r.values = {{"AP", 0.001 * static_cast<double>(step)}, {"AP50", 0.002 * static_cast<double>(step)},
                {"AP75", std::nan("")}, {"total_loss", 0.5}};
    records.push_back(r);
  }
  return records;
}

TEST(Plot, RunChartsPickTheMetrics) {
  std::vector<MetricsRecord> records = sample_records();
  // A resumed run logs step 100 again: the later record wins.
  MetricsRecord again = records[9];
  again.values[0].second = 0.5;
  records.push_back(again);
  const std::vector<RunChart> charts = run_charts(records);
  ASSERT_EQ(charts.size(), 4u);
  EXPECT_EQ(charts[0].name, "loss");
  std::vector<std::string> names;
  for (const auto& s : charts[0].series) names.push_back(s.name);
  // num_positives is not a loss; l2_loss is (all zero is still data).
  EXPECT_EQ(names, (std::vector<std::string>{"total_loss", "cls_loss", "box_loss", "l2_loss", "eval total_loss"}));
  const PlotSeries& total = charts[0].series[0];
  ASSERT_EQ(total.x.size(), 10u);
  EXPECT_EQ(total.x.front(), 10);
  EXPECT_EQ(total.x.back(), 100);
  EXPECT_DOUBLE_EQ(total.y.front(), 0.2);
  EXPECT_DOUBLE_EQ(total.y.back(), 0.5);
  EXPECT_TRUE(charts[0].series[4].markers);
  EXPECT_EQ(charts[1].name, "learning_rate");
  EXPECT_DOUBLE_EQ(charts[1].series[0].y[4], 0.005);
  EXPECT_EQ(charts[2].name, "grad_norm");
  EXPECT_EQ(charts[3].name, "eval_ap");
  ASSERT_EQ(charts[3].series.size(), 2u);  // AP75 has no finite value
  EXPECT_EQ(charts[3].series[0].name, "eval AP");
  EXPECT_EQ(charts[3].series[1].x, (std::vector<double>{50, 100}));
  EXPECT_DOUBLE_EQ(charts[3].series[1].y[1], 0.2);
}

TEST(Plot, PlotRunWritesPngsOfTheRequestedSize) {
  const std::string dir = fresh_dir("run");
  std::vector<MetricsRecord> records = sample_records();
  {
    MetricsJsonlWriter train(dir + "/metrics.jsonl");
    MetricsJsonlWriter eval(dir + "/eval/metrics.jsonl");
    for (const auto& r : records) (r.split == "eval" ? eval : train).write(r);
  }
  PlotOptions o;
  o.width = 640;
  o.height = 360;
  const auto written = plot_run(dir, dir + "/plots", o);
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written[0], dir + "/plots/loss.png");
  EXPECT_EQ(written[3], dir + "/plots/eval_ap.png");
  for (const auto& path : written) {
    cv::Mat png = cv::imread(path, cv::IMREAD_UNCHANGED);
    ASSERT_FALSE(png.empty()) << path;
    EXPECT_EQ(png.cols, 640) << path;
    EXPECT_EQ(png.rows, 360) << path;
    EXPECT_EQ(png.channels(), 3) << path;
  }
  fs::remove_all(dir);
}

TEST(Plot, MissingAndMalformedLogsNameTheFile) {
  const std::string dir = fresh_dir("bad");
  try {
    plot_run(dir, dir + "/plots");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/metrics.jsonl"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir + "/eval/metrics.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plot_run(dir + "/nope", dir + "/plots"), Error);
  std::ofstream(dir + "/metrics.jsonl") << "{\"step\": 1, \"split\": \"train\", \"total_loss\": 1.0}\n"
                                        << "{\"step\": 2, \"split\": \"train\", \"total_loss\": 0.9}\n"
                                        << "{\"step\": 3, \"split\": \"tr\n";
  try {
    plot_run(dir, dir + "/plots");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/metrics.jsonl:3:"), std::string::npos) << e.what();
  }
  // A line without a step is malformed too.
  std::ofstream(dir + "/metrics.jsonl") << "{\"split\": \"train\", \"total_loss\": 1.0}\n";
  try {
    plot_run(dir, dir + "/plots");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/metrics.jsonl:1:"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace detseg
