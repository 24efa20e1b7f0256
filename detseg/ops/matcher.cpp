// Implements: argmax matching with thresholds, ignore band and forced per-row matches.
#include "detseg/ops/matcher.h"

#include "detseg/core/error.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

at::Tensor argmax_match(const at::Tensor& sim, const ArgMaxMatcherOptions& o,
                        const at::Tensor& valid_rows) {
  DETSEG_CHECK(sim.defined() && sim.dim() == 2, "argmax_match: expected similarity [M, N], got ",
               sim.defined() ? sim.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(at::isFloatingType(sim.scalar_type()), "argmax_match: expected floating similarity, got ",
               sim.scalar_type());
  // NaN scan on CPU only (on an accelerator it would synchronise every matching call).
  DETSEG_CHECK(sim.numel() == 0 || !host_value_checks(sim) || !at::isnan(sim).any().item<bool>(),
               "argmax_match: similarity contains NaN");
  const double matched = o.matched_threshold.value_or(0.0);
  const double unmatched = o.unmatched_threshold.value_or(matched);
  DETSEG_CONFIG_CHECK(!o.matched_threshold || unmatched <= matched,
                      "argmax_match: unmatched_threshold ", unmatched,
                      " must be <= matched_threshold ", matched);
  const int64_t m = sim.size(0), n = sim.size(1);
  auto long_opts = sim.options().dtype(at::kLong);
  if (m == 0) return at::full({n}, kMatchUnmatched, long_opts);
  at::Tensor s = sim;
  const at::Tensor valid =
      valid_rows.defined() ? valid_rows.to(sim.device(), at::kBool) : at::Tensor();
  if (valid_rows.defined()) {
    DETSEG_CHECK(valid_rows.dim() == 1 && valid_rows.size(0) == m,
                 "argmax_match: expected valid_rows [", m, "], got ", valid_rows.sizes());
    // Invalid rows can never win a column.
    s = at::where(valid.unsqueeze(1), sim,
                  at::full({}, -std::numeric_limits<double>::infinity(), sim.options()));
  }
  auto best = s.max(0);  // first maximal row on ties
  at::Tensor best_val = std::get<0>(best), match = std::get<1>(best).clone();
  if (o.matched_threshold) {
    auto low = best_val < unmatched;
    auto band = (best_val >= unmatched) & (best_val < matched);
    const int64_t low_value = o.negatives_lower_than_unmatched ? kMatchUnmatched : kMatchIgnored;
    const int64_t band_value = o.negatives_lower_than_unmatched ? kMatchIgnored : kMatchUnmatched;
    match.masked_fill_(low, low_value);
    match.masked_fill_(band, band_value);
  }
  if (valid_rows.defined()) {
    // Columns whose only candidates are invalid rows (all -inf) are unmatched.
    match.masked_fill_(at::isinf(best_val) & (best_val < 0), kMatchUnmatched);
  }
  if (o.force_match_for_each_row && n > 0) {
    auto col_of_row = std::get<1>(s.max(1));  // [M], first maximal column on ties
    // A column claimed by several rows goes to the lowest row: a scatter with "amin" (order
    // independent, so deterministic on every device, and no copy to the host).
    auto rows = at::arange(m, long_opts);
    if (valid_rows.defined()) rows = rows.index_select(0, valid.nonzero().view(-1));
    auto cols = col_of_row.index_select(0, rows);
    auto claimed = at::full({n}, m, long_opts).scatter_reduce(0, cols, rows, "amin",
                                                              /*include_self=*/true);
    match = at::where(claimed < m, claimed, match);
  }
  return match;
}

at::Tensor gather_by_match(const at::Tensor& rows, const at::Tensor& match,
                           const at::Tensor& unmatched_value, const at::Tensor& ignored_value) {
  DETSEG_CHECK(rows.defined() && rows.dim() >= 1, "gather_by_match: rows must be [M, ...]");
  DETSEG_CHECK(match.defined() && match.dim() == 1 && match.scalar_type() == at::kLong,
               "gather_by_match: expected an int64 match [N], got ",
               match.defined() ? match.sizes() : at::IntArrayRef{});
  auto row_shape = rows.sizes().slice(1);
  auto u = unmatched_value.to(rows.options()).expand(row_shape).unsqueeze(0);
  auto g = ignored_value.to(rows.options()).expand(row_shape).unsqueeze(0);
  // Row 0 = ignored, row 1 = unmatched, row k + 2 = rows[k]; match + 2 indexes it directly.
  auto table = at::cat({g, u, rows}, 0);
  // Range check on CPU only; on an accelerator index_select itself asserts on a bad index.
  DETSEG_CHECK(match.numel() == 0 || !host_value_checks(match) ||
                   (match.min().item<int64_t>() >= -2 && match.max().item<int64_t>() < rows.size(0)),
               "gather_by_match: match values must be in [-2, ", rows.size(0), ")");
  return table.index_select(0, match + 2);
}

}  // namespace detseg
