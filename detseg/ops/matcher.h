// Implements: the Object Detection API's argmax matcher (anchors to ground truth by similarity),
// and gathering per-row values along a match.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace detseg {

// Match result values for a column (anchor): >= 0 the matched row (ground-truth box),
constexpr int64_t kMatchUnmatched = -1;  // negative: background
constexpr int64_t kMatchIgnored = -2;    // neither positive nor negative: excluded from the loss

struct ArgMaxMatcherOptions {
  // Columns whose best similarity is >= matched_threshold match their argmax row. nullopt: every
  // column matches its argmax row (no thresholds).
  std::optional<double> matched_threshold = 0.5;
  // Columns below this are "low"; those in [unmatched, matched) are the "between" band. Defaults to
  // matched_threshold (no band). Must be <= matched_threshold.
  std::optional<double> unmatched_threshold;
  // true: low -> unmatched (-1), band -> ignored (-2). false: low -> ignored, band -> unmatched.
  bool negatives_lower_than_unmatched = true;
  // Each row's best column is matched to it even below the thresholds (lowest row wins a column
  // claimed by several rows).
  bool force_match_for_each_row = false;
};

// similarity: [M rows (ground truth), N columns (anchors)] -> match int64 [N]. With M == 0 every
// column is unmatched. Argmax ties go to the lowest row index. valid_rows: optional bool [M];
// invalid rows (padding) never match. NaN similarities throw detseg::Error on CPU tensors (the
// scan is skipped on accelerators, where it would synchronise every call). No host loop: the
// forced per-row match is a scatter on the similarity's device.
at::Tensor argmax_match(const at::Tensor& similarity, const ArgMaxMatcherOptions& options,
                        const at::Tensor& valid_rows = {});

// out[n] = rows[match[n]] for match >= 0, unmatched_value for -1, ignored_value for -2.
// rows: [M, ...]; the two values broadcast to rows' per-row shape [...]. Result [N, ...].
at::Tensor gather_by_match(const at::Tensor& rows, const at::Tensor& match,
                           const at::Tensor& unmatched_value, const at::Tensor& ignored_value);

}  // namespace detseg
