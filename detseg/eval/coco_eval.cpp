// Implements: COCO evaluate / accumulate / summarize with pycocotools' exact semantics (see
// coco_eval.h). Ground truth and detections are bucketed once into (category, image) cells; each
// cell is matched independently (in parallel), then each category is accumulated (in parallel).
#include "detseg/eval/coco_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include "detseg/core/error.h"
#include <thread>
#include "detseg/eval/parallel.h"
#include "detseg/data/readers/rle.h"

namespace detseg {

std::vector<double> numpy_linspace(double start, double stop, int64_t num) {
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(num, 0)));
  if (num <= 0) return out;
  if (num == 1) {
    out[0] = start;
    return out;
  }
  const double step = (stop - start) / static_cast<double>(num - 1);
  for (int64_t i = 0; i < num; ++i) out[i] = static_cast<double>(i) * step + start;
  out[num - 1] = stop;
  return out;
}

CocoEvalParams::CocoEvalParams()
    : iou_thresholds(numpy_linspace(.5, 0.95, static_cast<int64_t>(std::round((0.95 - .5) / .05)) + 1)),
      recall_thresholds(numpy_linspace(.0, 1.00, static_cast<int64_t>(std::round((1.00 - .0) / .01)) + 1)) {}

namespace {

double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// Detections and ground truth of one dataset grouped by cell: cell c holds the annotations whose
// image is params image i and category k (c = k * I + i), or in class-agnostic mode every
// category of image i (c = i) ordered by category then file order, as pycocotools gathers them.
struct Buckets {
  std::vector<int64_t> order;    // annotation positions, grouped by cell
  std::vector<int64_t> offsets;  // [cells + 1]
};

Buckets bucket(const CocoDataset& data, const std::unordered_map<int64_t, int64_t>& image_pos,
               const std::unordered_map<int64_t, int64_t>& category_pos, int64_t I, int64_t K,
               bool use_categories) {
  // Image and category of every annotation through plain tables (the dataset's index already
  // groups annotations by image), not a hash lookup per annotation.
  DETSEG_CHECK(data.annotations_by_image.size() == data.images.size(), data.source,
               ": the dataset is not indexed (call index())");
  std::vector<int64_t> param_image(data.images.size(), -1);
  for (size_t ip = 0; ip < data.images.size(); ++ip) {
    auto it = image_pos.find(data.images[ip].id);
    if (it != image_pos.end()) param_image[ip] = it->second;
  }
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& [id, k] : category_pos) {
    lo = std::min(lo, id);
    hi = std::max(hi, id);
  }
  const bool dense = !category_pos.empty() && hi / 2 - lo / 2 < (int64_t(1) << 19);  // no overflow
  std::vector<int64_t> category_table(dense ? static_cast<size_t>(hi - lo + 1) : 0, -1);
  for (const auto& [id, k] : category_pos)
    if (dense) category_table[id - lo] = k;
  auto category_of = [&](int64_t id) -> int64_t {
    if (dense) return id < lo || id > hi ? -1 : category_table[id - lo];
    auto it = category_pos.find(id);
    return it == category_pos.end() ? -1 : it->second;
  };
  // One counting sort by a fine key keeps file order inside each key.
  const int64_t keys = I * K;
  std::vector<int64_t> key(data.annotations.size(), -1);
  std::vector<int64_t> count(static_cast<size_t>(keys) + 1, 0);
  for (size_t ip = 0; ip < data.images.size(); ++ip) {
    const int64_t i = param_image[ip];
    if (i < 0) continue;
    for (int64_t j : data.annotations_by_image[ip]) {
      const int64_t k = category_of(data.annotations[j].category_id);
      if (k < 0) continue;
      key[j] = use_categories ? k * I + i : i * K + k;
      ++count[key[j] + 1];
    }
  }
  for (int64_t k = 0; k < keys; ++k) count[k + 1] += count[k];
  Buckets b;
  b.order.resize(static_cast<size_t>(count[keys]));
  std::vector<int64_t> fill(count.begin(), count.end() - 1);
  for (size_t j = 0; j < key.size(); ++j)
    if (key[j] >= 0) b.order[fill[key[j]]++] = static_cast<int64_t>(j);
  const int64_t cells = use_categories ? keys : I;
  const int64_t stride = use_categories ? 1 : K;
  b.offsets.resize(static_cast<size_t>(cells) + 1);
  for (int64_t c = 0; c <= cells; ++c) b.offsets[c] = count[c * stride];
  return b;
}

std::vector<int64_t> sorted_unique(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// What matching produced for every kept detection ("slot"): for each area range and threshold,
// bit 0 = matched to a ground truth with a non-zero id, bit 1 = ignored.
enum : uint8_t { kMatched = 1, kIgnored = 2 };
static_assert(kMatched == CocoEvalResult::kMatchTrue && kIgnored == CocoEvalResult::kMatchIgnored,
              "match_flags hands these bits out as they are");

struct Evaluation {
  int64_t I = 0, K = 0, cells = 0, A = 0, T = 0;
  std::vector<int64_t> slot_offsets;  // [cells + 1]: kept detections of cell c
  std::vector<int64_t> slot_dt;       // detection position, per slot, best score first
  std::vector<uint8_t> flags;         // [slots, A, T]
  std::vector<int64_t> npig;          // [cells, A] ground truth that is not ignored
};

struct Masks {
  std::vector<CocoRle> rle;
  std::vector<std::array<double, 4>> box;  // rleToBbox of each mask, for the box prefilter
};

// RLEs of the annotations that take part (segm only), built in parallel.
Masks make_masks(const CocoDataset& data, const std::vector<int64_t>& used, int threads) {
  Masks m;
  m.rle.resize(data.annotations.size());
  m.box.resize(data.annotations.size());
  eval_parallel_for(static_cast<int64_t>(used.size()), threads, 64, [&](int64_t b, int64_t e, int) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t j = used[u];
      const auto& a = data.annotations[j];
      const CocoImage& im = data.images[data.image_index.at(a.image_id)];
      m.rle[j] = segmentation_to_rle(a.segmentation, im.height, im.width);
      rle_to_box(m.rle[j], m.box[j].data());
    }
  });
  return m;
}

struct CellScratch {
  std::vector<int64_t> dts, gt_perm;
  std::vector<double> ious;  // [D, G] in original ground-truth order
  std::vector<uint8_t> gt_ignore, gt_crowd, gt_taken;
};

// Sorts the cell's detections best first (pycocotools: argsort(-score, kind='mergesort'), a
// stable sort). Most cells are small, where an insertion sort (stable, no buffer) is fastest.
void sort_cell_detections(const CocoDataset& dt, std::vector<int64_t>& dts) {
  const auto better = [&](int64_t a, int64_t b) { return dt.annotations[a].score > dt.annotations[b].score; };
  const int64_t n = static_cast<int64_t>(dts.size());
  if (n > 32) {
    std::stable_sort(dts.begin(), dts.end(), better);
    return;
  }
  for (int64_t i = 1; i < n; ++i) {
    const int64_t v = dts[i];
    int64_t j = i;
    for (; j > 0 && better(v, dts[j - 1]); --j) dts[j] = dts[j - 1];
    dts[j] = v;
  }
}

// ious: [D, G], detections best first, ground truth in bucket order (computeIoU).
void cell_ious(const CocoDataset& gt, const CocoDataset& dt, const int64_t* gts, int64_t G,
               const int64_t* dts, int64_t D, const CocoEvalParams& p, const Masks* gt_masks,
               const Masks* dt_masks, const uint8_t* crowd, std::vector<double>& ious) {
  ious.assign(static_cast<size_t>(D * G), 0.0);
  for (int64_t d = 0; d < D; ++d) {
    const int64_t dj = dts[d];
    for (int64_t g = 0; g < G; ++g) {
      const int64_t gj = gts[g];
      double iou;
      if (p.iou_type == CocoIouType::kBbox) {
        iou = box_iou_coco(dt.annotations[dj].bbox, gt.annotations[gj].bbox, crowd[g]);
      } else {
        // rleIou first compares the masks' boxes and only walks the runs where they overlap.
        iou = box_iou_coco(dt_masks->box[dj].data(), gt_masks->box[gj].data(), crowd[g]);
        if (iou > 0) iou = rle_iou(dt_masks->rle[dj], gt_masks->rle[gj], crowd[g]);
      }
      ious[d * G + g] = iou;
    }
  }
}

// evaluateImg for every area range of one cell: fills the cell's slots' flags and npig.
void evaluate_cell(int64_t c, const CocoDataset& gt, const CocoDataset& dt, const Buckets& gb,
                   const Buckets& db, const CocoEvalParams& p, const Masks* gt_masks,
                   const Masks* dt_masks, Evaluation& ev, CellScratch& s) {
  const int64_t g0 = gb.offsets[c], G = gb.offsets[c + 1] - g0;
  const int64_t d0 = db.offsets[c], Dall = db.offsets[c + 1] - d0;
  const int64_t A = ev.A, T = ev.T;
  if (G == 0 && Dall == 0) return;
  s.dts.assign(db.order.begin() + d0, db.order.begin() + d0 + Dall);
  sort_cell_detections(dt, s.dts);
  const int64_t slot0 = ev.slot_offsets[c];
  const int64_t D = ev.slot_offsets[c + 1] - slot0;  // min(Dall, max_dets.back())
  for (int64_t d = 0; d < D; ++d) ev.slot_dt[slot0 + d] = s.dts[d];
  s.gt_crowd.resize(G);
  for (int64_t g = 0; g < G; ++g) s.gt_crowd[g] = gt.annotations[gb.order[g0 + g]].iscrowd;
  cell_ious(gt, dt, gb.order.data() + g0, G, s.dts.data(), D, p, gt_masks, dt_masks, s.gt_crowd.data(), s.ious);

  s.gt_ignore.resize(G);
  s.gt_perm.resize(G);
  s.gt_taken.resize(static_cast<size_t>(G));
  for (int64_t a = 0; a < A; ++a) {
    const double lo = p.area_ranges[a][0], hi = p.area_ranges[a][1];
    int64_t not_ignored = 0;
    for (int64_t g = 0; g < G; ++g) {
      // pycocotools overwrites any "ignore" field with iscrowd before this test.
      const auto& ann = gt.annotations[gb.order[g0 + g]];
      s.gt_ignore[g] = ann.iscrowd || ann.area < lo || ann.area > hi;
      not_ignored += !s.gt_ignore[g];
    }
    ev.npig[c * A + a] = not_ignored;
    // Stable: ground truth that counts first, ignored last, each in file order.
    int64_t front = 0, back = not_ignored;
    for (int64_t g = 0; g < G; ++g) s.gt_perm[s.gt_ignore[g] ? back++ : front++] = g;
    for (int64_t t = 0; t < T; ++t) {
      std::fill(s.gt_taken.begin(), s.gt_taken.end(), 0);
      const double threshold = std::min(p.iou_thresholds[t], 1 - 1e-10);
      for (int64_t d = 0; d < D; ++d) {
        const double* row = s.ious.data() + d * G;
        double best = threshold;
        int64_t m = -1;  // position in gt_perm order
        for (int64_t q = 0; q < G; ++q) {
          const int64_t g = s.gt_perm[q];
          if (s.gt_taken[q] && !s.gt_crowd[g]) continue;
          // Matched to a counted ground truth already; the rest are ignored ones: stop.
          if (m > -1 && !s.gt_ignore[s.gt_perm[m]] && s.gt_ignore[g]) break;
          if (row[g] < best) continue;
          best = row[g];
          m = q;
        }
        uint8_t f = 0;
        if (m > -1) {
          const int64_t g = s.gt_perm[m];
          s.gt_taken[m] = 1;
          if (s.gt_ignore[g]) f |= kIgnored;
          // pycocotools stores the ground-truth id and later reads it as a boolean: id 0 counts
          // as "unmatched". Kept for identical numbers.
          if (gt.annotations[gb.order[g0 + g]].id != 0) f |= kMatched;
        }
        const double area = dt.annotations[s.dts[d]].area;
        if (!(f & kMatched) && (area < lo || area > hi)) f |= kIgnored;
        ev.flags[((slot0 + d) * A + a) * T + t] = f;
      }
    }
  }
}

struct Entry {
  double score;
  int64_t slot;
  int64_t first_m;  // the first max_dets index whose limit keeps this detection (its rank is below)
};

// One precision/recall curve under construction. Only true positives are recorded: recall
// changes only there, each one has the highest precision of its run, and entries before the first
// one have precision 0, so the interpolated values at the recall thresholds are the ones
// pycocotools reads off its full per-detection curve.
struct Curve {
  double tp = 0, fp = 0;
  size_t nd = 0;
  std::vector<double> rc, pr;
};

struct AccumulateScratch {
  std::vector<Entry> entries;
  std::vector<uint8_t> flags;  // [A, T, n] the entries' flags in score order
  std::vector<Curve> curves;   // one per max_dets
};

// Writes recall[t,k,a,m] and precision[t,:,k,a,m] from one finished curve. (pycocotools' third
// array, the score at each recall threshold, feeds no statistic and is not kept.)
void finish_curve(Curve& c, int64_t npig, const CocoEvalParams& p, double* recall, double* precision,
                  int64_t stride) {
  *recall = c.nd ? c.tp / static_cast<double>(npig) : 0;
  for (size_t i = c.pr.size() > 0 ? c.pr.size() - 1 : 0; i > 0; --i)
    if (c.pr[i] > c.pr[i - 1]) c.pr[i - 1] = c.pr[i];
  // searchsorted(rc, recThrs, side='left'); thresholds past the last recall stay 0.
  size_t idx = 0;
  const int64_t R = static_cast<int64_t>(p.recall_thresholds.size());
  for (int64_t r = 0; r < R; ++r) {
    const double threshold = p.recall_thresholds[r];
    while (idx < c.rc.size() && c.rc[idx] < threshold) ++idx;
    precision[r * stride] = idx < c.rc.size() ? c.pr[idx] : 0.0;
  }
}

void accumulate_category(int64_t k, const Evaluation& ev, const CocoDataset& dt,
                         const CocoEvalParams& p, CocoEvalResult& out, AccumulateScratch& s) {
  const int64_t I = ev.I, A = ev.A, T = ev.T, R = out.R, M = out.M, K = out.K;
  s.entries.clear();
  for (int64_t i = 0; i < I; ++i) {
    const int64_t c = k * I + i;
    for (int64_t slot = ev.slot_offsets[c]; slot < ev.slot_offsets[c + 1]; ++slot) {
      const int64_t rank = slot - ev.slot_offsets[c];
      int64_t first_m = 0;
      while (first_m < M && rank >= p.max_dets[first_m]) ++first_m;
      s.entries.push_back({dt.annotations[ev.slot_dt[slot]].score, slot, first_m});
    }
  }
  // Stable on the image-then-rank concatenation, as numpy's mergesort of -score.
  std::stable_sort(s.entries.begin(), s.entries.end(),
                   [](const Entry& a, const Entry& b) { return a.score > b.score; });
  const size_t n = s.entries.size();
  s.flags.resize(static_cast<size_t>(A * T) * n);
  for (size_t e = 0; e < n; ++e) {
    const uint8_t* f = ev.flags.data() + s.entries[e].slot * A * T;
    for (int64_t at = 0; at < A * T; ++at) s.flags[at * n + e] = f[at];
  }
  s.curves.resize(static_cast<size_t>(M));
  const double eps = std::numeric_limits<double>::epsilon();  // np.spacing(1)
  for (int64_t a = 0; a < A; ++a) {
    int64_t npig = 0;
    for (int64_t i = 0; i < I; ++i) npig += ev.npig[(k * I + i) * A + a];
    if (npig == 0) continue;  // no ground truth: precision and recall stay -1
    const double n_pos = static_cast<double>(npig);
    for (int64_t t = 0; t < T; ++t) {
      // One pass builds the curves of every max_dets (a detection kept by max_dets[m] is kept by
      // every larger one).
      for (Curve& c : s.curves) {
        c.tp = c.fp = 0;
        c.nd = 0;
        c.rc.clear();
        c.pr.clear();
      }
      const uint8_t* flags = s.flags.data() + (a * T + t) * n;
      for (size_t e = 0; e < n; ++e) {
        const Entry& entry = s.entries[e];
        const uint8_t f = flags[e];
        for (int64_t m = entry.first_m; m < M; ++m) {
          Curve& c = s.curves[m];
          ++c.nd;
          if (f & kIgnored) continue;
          if (f & kMatched) {
            ++c.tp;
            c.rc.push_back(c.tp / n_pos);
            c.pr.push_back(c.tp / (c.fp + c.tp + eps));
          } else {
            ++c.fp;
          }
        }
      }
      for (int64_t m = 0; m < M; ++m) {
        const size_t at = (((t * R) * K + k) * A + a) * M + m;  // r = 0; r steps by K*A*M
        finish_curve(s.curves[m], npig, p, &out.recall[((t * K + k) * A + a) * M + m], &out.precision[at],
                     K * A * M);
      }
    }
  }
}

// pycocotools' evaluate(): default ids from the ground truth, ids sorted and unique, maxDets sorted.
CocoEvalParams resolve_params(const CocoEvalParams& params, const CocoDataset& gt) {
  CocoEvalParams p = params;
  if (p.image_ids.empty())
    for (const auto& im : gt.images) p.image_ids.push_back(im.id);
  if (p.category_ids.empty())
    for (const auto& c : gt.categories) p.category_ids.push_back(c.id);
  p.image_ids = sorted_unique(p.image_ids);
  p.category_ids = sorted_unique(p.category_ids);
  std::sort(p.max_dets.begin(), p.max_dets.end());
  DETSEG_CONFIG_CHECK(!p.max_dets.empty() && p.max_dets.front() >= 0, "coco eval: max_dets must be non-negative, and not empty");
  DETSEG_CONFIG_CHECK(!p.iou_thresholds.empty() && !p.recall_thresholds.empty(),
                      "coco eval: iou_thresholds and recall_thresholds must not be empty");
  DETSEG_CONFIG_CHECK(p.area_ranges.size() == p.area_labels.size(), "coco eval: ", p.area_ranges.size(),
                      " area_ranges but ", p.area_labels.size(), " area_labels");
  DETSEG_CONFIG_CHECK(std::is_sorted(p.recall_thresholds.begin(), p.recall_thresholds.end()),
                      "coco eval: recall_thresholds must be ascending");
  return p;
}

// AP over the IoU thresholds [t_first, t_last), area "all" (or the first range), the last max_dets,
// per category; -1 without ground truth.
std::vector<double> per_category_ap(const CocoEvalResult& out, int64_t t_first, int64_t t_last) {
  int64_t a_all = 0;
  for (int64_t a = 0; a < out.A; ++a)
    if (out.params.area_labels[a] == "all") {
      a_all = a;
      break;
    }
  std::vector<double> aps, values;
  for (int64_t k = 0; k < out.K; ++k) {
    values.clear();
    for (int64_t t = t_first; t < t_last; ++t)
      for (int64_t r = 0; r < out.R; ++r) {
        const double v = out.precision_at(t, r, k, a_all, out.M - 1);
        if (v > -1) values.push_back(v);
      }
    aps.push_back(values.empty() ? -1.0 : numpy_sum(values.data(), values.size()) / values.size());
  }
  return aps;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double numpy_sum(const double* values, size_t n) {
  // numpy reduces contiguous float64 in buffer-sized blocks (8192), each summed pairwise.
  double total = 0;
  for (size_t b = 0; b < n; b += 8192) total += pairwise_sum(values + b, std::min<size_t>(8192, n - b));
  return total;
}

CocoEvalResult coco_evaluate(const CocoDataset& gt, const CocoDataset& dt, const CocoEvalParams& params,
                             int threads) {
  const auto start = std::chrono::steady_clock::now();
  // std::thread rather than core/threads.h keeps eval/ free of ATen (a torch-free tool can link it).
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CocoEvalResult out;
  out.params = resolve_params(params, gt);
  const CocoEvalParams& p = out.params;

  std::unordered_map<int64_t, int64_t> image_pos, category_pos;
  for (size_t i = 0; i < p.image_ids.size(); ++i) image_pos.emplace(p.image_ids[i], i);
  for (size_t k = 0; k < p.category_ids.size(); ++k) category_pos.emplace(p.category_ids[k], k);

  Evaluation ev;
  ev.I = static_cast<int64_t>(p.image_ids.size());
  ev.K = p.use_categories ? static_cast<int64_t>(p.category_ids.size()) : 1;
  ev.A = static_cast<int64_t>(p.area_ranges.size());
  ev.T = static_cast<int64_t>(p.iou_thresholds.size());
  ev.cells = ev.K * ev.I;
  const int64_t all_k = static_cast<int64_t>(p.category_ids.size());
  Buckets gb = bucket(gt, image_pos, category_pos, ev.I, all_k, p.use_categories);
  Buckets db = bucket(dt, image_pos, category_pos, ev.I, all_k, p.use_categories);

  ev.slot_offsets.assign(static_cast<size_t>(ev.cells) + 1, 0);
  for (int64_t c = 0; c < ev.cells; ++c)
    ev.slot_offsets[c + 1] = ev.slot_offsets[c] + std::min<int64_t>(db.offsets[c + 1] - db.offsets[c], p.max_dets.back());
  const int64_t slots = ev.slot_offsets[ev.cells];
  ev.slot_dt.assign(static_cast<size_t>(slots), -1);
  ev.flags.assign(static_cast<size_t>(slots * ev.A * ev.T), 0);
  ev.npig.assign(static_cast<size_t>(ev.cells * ev.A), 0);

  // A thread costs ~0.1-0.2 ms to start: below a few thousand boxes (or a few hundred masks) per
  // extra thread the whole evaluation is faster on one (the small bench case: 7.5 -> 6.8 ms).
  const int64_t per_thread = p.iou_type == CocoIouType::kSegm ? 512 : 4096;
  const int64_t work = static_cast<int64_t>(gt.annotations.size() + dt.annotations.size());
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, work / per_thread)));

  Masks gt_masks, dt_masks;
  if (p.iou_type == CocoIouType::kSegm) {
    gt_masks = make_masks(gt, gb.order, threads);
    dt_masks = make_masks(dt, db.order, threads);
  }
  std::vector<CellScratch> cell_scratch(static_cast<size_t>(threads));
  eval_parallel_for(ev.cells, threads, 256, [&](int64_t b, int64_t e, int w) {
    for (int64_t c = b; c < e; ++c)
      evaluate_cell(c, gt, dt, gb, db, p, &gt_masks, &dt_masks, ev, cell_scratch[w]);
  });
  out.seconds_evaluate = seconds_since(start);
  if (p.keep_matches) {
    int64_t a_all = 0;
    for (int64_t a = 0; a < ev.A; ++a)
      if (p.area_labels[a] == "all") {
        a_all = a;
        break;
      }
    out.match_detection.reserve(static_cast<size_t>(slots));
    out.match_category.reserve(static_cast<size_t>(slots));
    out.match_flags.reserve(static_cast<size_t>(slots * ev.T));
    for (int64_t c = 0; c < ev.cells; ++c)
      for (int64_t slot = ev.slot_offsets[c]; slot < ev.slot_offsets[c + 1]; ++slot) {
        out.match_detection.push_back(ev.slot_dt[slot]);
        out.match_category.push_back(c / ev.I);  // cell c = k * I + i (class-agnostic: c = i, k = 0)
        const uint8_t* f = ev.flags.data() + (slot * ev.A + a_all) * ev.T;
        out.match_flags.insert(out.match_flags.end(), f, f + ev.T);
      }
  }

  const auto accumulate_start = std::chrono::steady_clock::now();
  out.T = ev.T;
  out.R = static_cast<int64_t>(p.recall_thresholds.size());
  out.K = ev.K;
  out.A = ev.A;
  out.M = static_cast<int64_t>(p.max_dets.size());
  const size_t n_precision = static_cast<size_t>(out.T * out.R * out.K * out.A * out.M);
  out.precision.assign(n_precision, -1.0);
  out.recall.assign(static_cast<size_t>(out.T * out.K * out.A * out.M), -1.0);
  std::vector<AccumulateScratch> acc_scratch(static_cast<size_t>(threads));
  eval_parallel_for(ev.K, threads, 1, [&](int64_t b, int64_t e, int w) {
    for (int64_t k = b; k < e; ++k) accumulate_category(k, ev, dt, p, out, acc_scratch[w]);
  });
  out.seconds_accumulate = seconds_since(accumulate_start);

  out.stats = coco_summarize(out);
  if (p.use_categories) {
    out.per_category_ap = per_category_ap(out, 0, out.T);
    // AP50 as pycocotools' stats[1] reads it: the IoU threshold 0.5 where the params have it.
    for (int64_t t = 0; t < out.T; ++t)
      if (std::abs(out.params.iou_thresholds[static_cast<size_t>(t)] - 0.5) < 1e-9) {
        out.per_category_ap50 = per_category_ap(out, t, t + 1);
        break;
      }
  }
  return out;
}

namespace {

struct StatSpec {
  bool ap;
  double iou;  // < 0: every threshold
  const char* area;
  int max_det_index;  // index into max_dets, or -1 for the literal 100 of _summarize's default
};

// pycocotools' _summarizeDets order.
const StatSpec kStats[12] = {
    {true, -1, "all", -1},    {true, .5, "all", 2},     {true, .75, "all", 2},
    {true, -1, "small", 2},   {true, -1, "medium", 2},  {true, -1, "large", 2},
    {false, -1, "all", 0},    {false, -1, "all", 1},    {false, -1, "all", 2},
    {false, -1, "small", 2},  {false, -1, "medium", 2}, {false, -1, "large", 2}};

int64_t stat_max_dets(const CocoEvalResult& r, const StatSpec& spec) {
  return spec.max_det_index < 0 ? 100 : r.params.max_dets[spec.max_det_index];
}

double summarize_one(const CocoEvalResult& r, const StatSpec& spec) {
  const auto& p = r.params;
  int64_t a = -1, m = -1;
  for (int64_t i = 0; i < r.A && a < 0; ++i)
    if (p.area_labels[i] == spec.area) a = i;
  const int64_t want = stat_max_dets(r, spec);
  for (int64_t i = 0; i < r.M && m < 0; ++i)
    if (p.max_dets[i] == want) m = i;
  if (a < 0 || m < 0) return -1;
  std::vector<double> values;
  for (int64_t t = 0; t < r.T; ++t) {
    if (spec.iou >= 0 && p.iou_thresholds[t] != spec.iou) continue;
    if (spec.ap) {
      for (int64_t rr = 0; rr < r.R; ++rr)
        for (int64_t k = 0; k < r.K; ++k) {
          const double v = r.precision_at(t, rr, k, a, m);
          if (v > -1) values.push_back(v);
        }
    } else {
      for (int64_t k = 0; k < r.K; ++k) {
        const double v = r.recall[((t * r.K + k) * r.A + a) * r.M + m];
        if (v > -1) values.push_back(v);
      }
    }
  }
  if (values.empty()) return -1;
  return numpy_sum(values.data(), values.size()) / static_cast<double>(values.size());
}

}  // namespace

std::array<double, 12> coco_summarize(const CocoEvalResult& result) {
  DETSEG_CONFIG_CHECK(result.params.max_dets.size() >= 3,
                      "coco eval: the summary needs 3 max_dets (pycocotools reads maxDets[2]), got ",
                      result.params.max_dets.size());
  std::array<double, 12> stats{};
  for (int i = 0; i < 12; ++i) stats[i] = summarize_one(result, kStats[i]);
  return stats;
}

std::string coco_summary_text(const CocoEvalResult& result) {
  const auto& p = result.params;
  char range[32], line[160];
  std::string out;
  for (int i = 0; i < 12; ++i) {
    const StatSpec& spec = kStats[i];
    if (spec.iou < 0)
      std::snprintf(range, sizeof(range), "%0.2f:%0.2f", p.iou_thresholds.front(), p.iou_thresholds.back());
    else
      std::snprintf(range, sizeof(range), "%0.2f", spec.iou);
    std::snprintf(line, sizeof(line), " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3lld ] = %0.3f\n",
                  spec.ap ? "Average Precision" : "Average Recall", spec.ap ? "(AP)" : "(AR)", range,
                  spec.area, static_cast<long long>(stat_max_dets(result, spec)), result.stats[i]);
    out += line;
  }
  return out;
}

}  // namespace detseg
