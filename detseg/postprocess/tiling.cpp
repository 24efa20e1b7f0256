#include "detseg/postprocess/tiling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "detseg/core/error.h"
#include "detseg/ops/nms.h"

namespace detseg {

namespace {

struct Box {
  float x1, y1, x2, y2;
  float area() const { return std::max(0.0f, x2 - x1) * std::max(0.0f, y2 - y1); }
};

float intersection(const Box& a, const Box& b) {
  const float w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1), h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  return w > 0 && h > 0 ? w * h : 0.0f;
}

// Intersection over the smaller box (SAHI's IOS).
float ios(const Box& a, const Box& b) {
  const float smaller = std::min(a.area(), b.area());
  return smaller > 0 ? intersection(a, b) / smaller : 0.0f;
}

float iou_1d(float a1, float a2, float b1, float b2) {
  const float inter = std::min(a2, b2) - std::max(a1, b1), uni = std::max(a2, b2) - std::min(a1, b1);
  return inter > 0 && uni > 0 ? inter / uni : 0.0f;
}

// Ranges that overlap or come within `gap` of each other.
bool meet(float a1, float a2, float b1, float b2, float gap) { return a1 <= b2 + gap && b1 <= a2 + gap; }

// Two pieces of one class from different tiles are one object: they meet across a seam where one
// is cut at its tile's right (bottom) edge and the other at its tile's left (top) edge, and agree
// along the seam; or one mostly lies inside the other.
bool same_object(const Box& p, int64_t p_cut, const Box& q, int64_t q_cut, double match, float gap) {
  if (ios(p, q) >= match) return true;
  if (!meet(p.x1, p.x2, q.x1, q.x2, gap) || !meet(p.y1, p.y2, q.y1, q.y2, gap)) return false;
  const bool vertical_seam = ((p_cut & kTileRight) && (q_cut & kTileLeft) && p.x1 < q.x1) ||
                             ((q_cut & kTileRight) && (p_cut & kTileLeft) && q.x1 < p.x1);
  if (vertical_seam && iou_1d(p.y1, p.y2, q.y1, q.y2) >= match) return true;
  const bool horizontal_seam = ((p_cut & kTileBottom) && (q_cut & kTileTop) && p.y1 < q.y1) ||
                               ((q_cut & kTileBottom) && (p_cut & kTileTop) && q.y1 < p.y1);
  return horizontal_seam && iou_1d(p.x1, p.x2, q.x1, q.x2) >= match;
}

int find_root(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// The starts of tiles of `size` along a side of `length`, the last one ending at the far edge.
std::vector<int64_t> starts(int64_t length, int64_t size, int64_t step) {
  std::vector<int64_t> out;
  if (length <= size) return {0};
  for (int64_t s = 0; s + size < length; s += step) out.push_back(s);
  if (out.back() + size < length) out.push_back(length - size);
  return out;
}

}  // namespace

std::vector<TileRect> tile_grid(int64_t width, int64_t height, int64_t size, double overlap) {
  DETSEG_CHECK(width > 0 && height > 0 && size > 0 && overlap >= 0 && overlap < 1, "tile_grid: a ", width, "x", height,
               " image in tiles of ", size, " overlapping by ", overlap);
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(size) * (1 - overlap))));
  std::vector<TileRect> tiles;
  for (int64_t y : starts(height, size, step))
    for (int64_t x : starts(width, size, step)) tiles.push_back({x, y, std::min(size, width), std::min(size, height)});
  return tiles;
}

double cut_margin(int64_t size) { return std::max(2.0, 0.01 * static_cast<double>(size)); }

at::Tensor cut_edges(const at::Tensor& boxes, const TileRect& tile, int64_t image_width, int64_t image_height,
                     double margin) {
  const at::Tensor b = boxes.to(at::kFloat).contiguous();
  const int64_t n = b.size(0);
  at::Tensor cut = at::zeros({n}, at::kLong);
  const auto box = b.accessor<float, 2>();
  auto out = cut.accessor<int64_t, 1>();
  const double left = static_cast<double>(tile.x), top = static_cast<double>(tile.y);
  const double right = static_cast<double>(tile.x + tile.width), bottom = static_cast<double>(tile.y + tile.height);
  for (int64_t i = 0; i < n; ++i) {
    int64_t bits = 0;
    if (tile.x > 0 && box[i][0] <= left + margin) bits |= kTileLeft;
    if (tile.y > 0 && box[i][1] <= top + margin) bits |= kTileTop;
    if (tile.x + tile.width < image_width && box[i][2] >= right - margin) bits |= kTileRight;
    if (tile.y + tile.height < image_height && box[i][3] >= bottom - margin) bits |= kTileBottom;
    out[i] = bits;
  }
  return cut;
}

MergedDetections merge_tile_detections(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                                       const at::Tensor& tiles, const at::Tensor& cut, const TileMergeOptions& options) {
  const int64_t n = boxes.size(0);
  DETSEG_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && scores.numel() == n && classes.numel() == n &&
                   tiles.numel() == n && cut.numel() == n,
               "merge_tile_detections: boxes [N, 4] with N scores, classes, tiles and cut bits");
  const at::Tensor b = boxes.to(at::kFloat).contiguous(), s = scores.to(at::kFloat).contiguous();
  const at::Tensor c = classes.to(at::kLong).contiguous(), t = tiles.to(at::kLong).contiguous();
  const at::Tensor e = cut.to(at::kLong).contiguous();
  const auto box_a = b.accessor<float, 2>();
  std::vector<Box> box(n);
  for (int64_t i = 0; i < n; ++i) box[i] = {box_a[i][0], box_a[i][1], box_a[i][2], box_a[i][3]};
  const float* score = s.data_ptr<float>();
  const int64_t* cls = c.data_ptr<int64_t>();
  const int64_t* tile = t.data_ptr<int64_t>();
  const int64_t* edges = e.data_ptr<int64_t>();

  // 1. Whole detections: per-class NMS across tiles.
  std::vector<int64_t> whole_rows, pieces;
  for (int64_t i = 0; i < n; ++i) (edges[i] == 0 ? whole_rows : pieces).push_back(i);
  std::vector<int64_t> whole;
  if (!whole_rows.empty()) {
    const at::Tensor rows = at::tensor(whole_rows, at::kLong);
    const at::Tensor kept = batched_nms(b.index_select(0, rows), s.index_select(0, rows), c.index_select(0, rows),
                                        options.iou_threshold);
    const at::Tensor kept_rows = rows.index_select(0, kept.to(at::kLong)).contiguous();
    whole.assign(kept_rows.data_ptr<int64_t>(), kept_rows.data_ptr<int64_t>() + kept_rows.numel());
  }

  // 2. Cut pieces joined across tiles into groups (union-find over pairs).
  const int m = static_cast<int>(pieces.size());
  std::vector<int> parent(m);
  std::iota(parent.begin(), parent.end(), 0);
  const float gap = 2.0f;
  for (int i = 0; i < m; ++i)
    for (int j = i + 1; j < m; ++j) {
      const int64_t p = pieces[i], q = pieces[j];
      if (cls[p] != cls[q] || tile[p] == tile[q]) continue;
      if (same_object(box[p], edges[p], box[q], edges[q], options.match_threshold, gap))
        parent[find_root(parent, i)] = find_root(parent, j);
    }
  struct Group {
    Box box;
    float score;
    int64_t source;
  };
  std::vector<Group> groups;
  std::vector<int> group_of(m, -1);
  for (int i = 0; i < m; ++i) {
    const int root = find_root(parent, i);
    const int64_t row = pieces[i];
    if (group_of[root] < 0) {
      group_of[root] = static_cast<int>(groups.size());
      groups.push_back({box[row], score[row], row});
      continue;
    }
    Group& g = groups[group_of[root]];
    g.box = {std::min(g.box.x1, box[row].x1), std::min(g.box.y1, box[row].y1), std::max(g.box.x2, box[row].x2),
             std::max(g.box.y2, box[row].y2)};
    if (score[row] > g.score) g.score = score[row], g.source = row;
  }

  // 3. A group a whole detection of its class covers is that detection's object.
  struct Kept {
    Box box;
    float score;
    int64_t source;
  };
  std::vector<Kept> kept;
  for (int64_t row : whole) kept.push_back({box[row], score[row], row});
  for (const Group& g : groups) {
    const float area = g.box.area();
    const bool covered = std::any_of(whole.begin(), whole.end(), [&](int64_t w) {
      return cls[w] == cls[g.source] && area > 0 && intersection(g.box, box[w]) / area >= options.match_threshold;
    });
    if (!covered) kept.push_back({g.box, g.score, g.source});
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& k) { return a.score > k.score; });

  const int64_t k = static_cast<int64_t>(kept.size());
  MergedDetections out;
  out.boxes = at::empty({k, 4}, at::kFloat);
  out.scores = at::empty({k}, at::kFloat);
  out.source = at::empty({k}, at::kLong);
  auto ob = out.boxes.accessor<float, 2>();
  auto os = out.scores.accessor<float, 1>();
  auto src = out.source.accessor<int64_t, 1>();
  for (int64_t i = 0; i < k; ++i) {
    ob[i][0] = kept[i].box.x1, ob[i][1] = kept[i].box.y1, ob[i][2] = kept[i].box.x2, ob[i][3] = kept[i].box.y2;
    os[i] = kept[i].score;
    src[i] = kept[i].source;
  }
  return out;
}

}  // namespace detseg
