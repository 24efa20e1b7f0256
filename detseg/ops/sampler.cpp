// Implements: balanced positive/negative sampling (dynamic and static shape).
#include "detseg/ops/sampler.h"

#include "detseg/core/error.h"

namespace detseg {

namespace {

void check_inputs(const at::Tensor& indicator, const at::Tensor& labels,
                  const BalancedSamplerOptions& o, const char* what) {
  DETSEG_CHECK(indicator.defined() && indicator.dim() == 1 && indicator.scalar_type() == at::kBool,
               what, ": expected a bool indicator [N], got ",
               indicator.defined() ? indicator.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(labels.defined() && labels.dim() == 1 && labels.scalar_type() == at::kBool &&
                   labels.size(0) == indicator.size(0),
               what, ": expected bool labels [", indicator.size(0), "], got ",
               labels.defined() ? labels.sizes() : at::IntArrayRef{});
  DETSEG_CONFIG_CHECK(o.positive_fraction >= 0 && o.positive_fraction <= 1, what,
                      ": positive_fraction must be in [0, 1], got ", o.positive_fraction);
  DETSEG_CONFIG_CHECK(!o.batch_size || *o.batch_size >= 0, what, ": batch_size must be >= 0, got ",
                      o.batch_size.value_or(0));
}

// Up to `count` of the true entries of `mask`, chosen uniformly at random (one permutation).
at::Tensor random_subset(const at::Tensor& mask, int64_t count,
                         c10::optional<at::Generator>& gen) {
  auto idx = mask.nonzero().view(-1);
  if (idx.size(0) <= count) return idx;
  auto perm = at::randperm(idx.size(0), gen, idx.options());
  return idx.index_select(0, perm.slice(0, 0, count));
}

struct Picked {
  at::Tensor pos, neg;
};

Picked pick(const at::Tensor& indicator, const at::Tensor& labels, const BalancedSamplerOptions& o,
            c10::optional<at::Generator> gen) {
  // A sequential host algorithm (randperm subsets): the inputs come to the CPU in one copy (one
  // device sync), the mask goes back to the input's device in mask_of.
  at::Tensor cpu_ind = indicator, cpu_lab = labels;
  if (!indicator.device().is_cpu() || !labels.device().is_cpu()) {
    const at::Tensor both = at::stack({indicator, labels.to(indicator.device())}).to(at::kCPU);
    cpu_ind = both[0];
    cpu_lab = both[1];
  }
  auto positives = cpu_ind & cpu_lab, negatives = cpu_ind & cpu_lab.logical_not();
  Picked p;
  if (o.batch_size) {
    const auto max_pos = static_cast<int64_t>(o.positive_fraction * double(*o.batch_size));
    p.pos = random_subset(positives, max_pos, gen);
    p.neg = random_subset(negatives, *o.batch_size - p.pos.size(0), gen);
  } else {
    DETSEG_CONFIG_CHECK(o.positive_fraction > 0,
                        "sample_balanced: without batch_size, positive_fraction must be > 0");
    p.pos = positives.nonzero().view(-1);
    const double ratio = (1.0 - o.positive_fraction) / o.positive_fraction;
    p.neg = random_subset(negatives, static_cast<int64_t>(ratio * double(p.pos.size(0))), gen);
  }
  return p;
}

at::Tensor mask_of(const Picked& p, int64_t n, const at::Device& device) {
  auto mask = at::zeros({n}, at::TensorOptions(at::kBool));
  mask.index_fill_(0, p.pos, true);
  mask.index_fill_(0, p.neg, true);
  return mask.to(device);
}

}  // namespace

at::Tensor sample_balanced(const at::Tensor& indicator, const at::Tensor& labels,
                           const BalancedSamplerOptions& o, c10::optional<at::Generator> gen) {
  check_inputs(indicator, labels, o, "sample_balanced");
  return mask_of(pick(indicator, labels, o, gen), indicator.size(0), indicator.device());
}

StaticSample sample_balanced_static(const at::Tensor& indicator, const at::Tensor& labels,
                                    const BalancedSamplerOptions& o,
                                    c10::optional<at::Generator> gen) {
  check_inputs(indicator, labels, o, "sample_balanced_static");
  DETSEG_CONFIG_CHECK(o.batch_size.has_value(), "sample_balanced_static: needs a batch_size");
  auto p = pick(indicator, labels, o, gen);
  StaticSample s;
  s.num_positives = p.pos.size(0);
  s.num_valid = p.pos.size(0) + p.neg.size(0);
  auto pad = at::full({*o.batch_size - s.num_valid}, -1, at::TensorOptions(at::kLong));
  s.indices = at::cat({p.pos, p.neg, pad}, 0).to(indicator.device());
  s.mask = mask_of(p, indicator.size(0), indicator.device());
  return s;
}

}  // namespace detseg
