// Implements: the COCO mask API (see rle.h). Written from maskApi.c's documented behaviour; the
// integer and rounding steps are kept exactly so masks match pycocotools pixel for pixel.
#include "detseg/data/readers/rle.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "detseg/core/error.h"

namespace detseg {

namespace {

CocoRle make_rle(int64_t height, int64_t width, std::vector<uint32_t> counts) {
  CocoRle rle;
  rle.height = height;
  rle.width = width;
  rle.counts = std::move(counts);
  return rle;
}

template <typename Pixel>
CocoRle encode_runs(int64_t height, int64_t width, Pixel pixel) {
  std::vector<uint32_t> counts;
  const int64_t n = height * width;
  uint8_t previous = 0;
  uint32_t run = 0;
  for (int64_t j = 0; j < n; ++j) {
    uint8_t value = pixel(j) ? 1 : 0;
    if (value != previous) {
      counts.push_back(run);
      run = 0;
      previous = value;
    }
    ++run;
  }
  counts.push_back(run);
  return make_rle(height, width, std::move(counts));
}

}  // namespace

CocoRle rle_encode(const uint8_t* mask, int64_t height, int64_t width) {
  return encode_runs(height, width, [&](int64_t j) { return mask[j]; });
}

CocoRle rle_encode_row_major(const uint8_t* mask, int64_t height, int64_t width) {
  // Column-major pixel j is (x = j / h, y = j % h).
  return encode_runs(height, width,
                     [&](int64_t j) { return mask[(j % height) * width + j / height]; });
}

void rle_decode(const CocoRle& rle, uint8_t* mask) {
  const int64_t n = rle.height * rle.width;
  int64_t p = 0;
  uint8_t value = 0;
  for (uint32_t count : rle.counts) {
    DETSEG_CHECK(p + count <= n, "RLE counts sum past ", rle.height, "x", rle.width);
    std::fill(mask + p, mask + p + count, value);
    p += count;
    value = !value;
  }
  std::fill(mask + p, mask + n, uint8_t(0));
}

void rle_decode_row_major(const CocoRle& rle, uint8_t* mask) {
  std::vector<uint8_t> column(static_cast<size_t>(rle.height * rle.width));
  rle_decode(rle, column.data());
  for (int64_t x = 0; x < rle.width; ++x)
    for (int64_t y = 0; y < rle.height; ++y) mask[y * rle.width + x] = column[x * rle.height + y];
}

std::string rle_to_string(const CocoRle& rle) {
  // LEB128-like: 5 data bits a character plus a continuation bit, offset into printable ASCII
  // 48..111; from the third count on, the value stored is the difference to the count two back.
  std::string out;
  out.reserve(rle.counts.size() * 2);
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    int64_t x = rle.counts[i];
    if (i > 2) x -= static_cast<int64_t>(rle.counts[i - 2]);
    bool more = true;
    while (more) {
      int c = static_cast<int>(x & 0x1f);
      x >>= 5;
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      out.push_back(static_cast<char>(c + 48));
    }
  }
  return out;
}

CocoRle rle_from_string(const std::string& s, int64_t height, int64_t width) {
  std::vector<uint32_t> counts;
  counts.reserve(s.size());
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      DETSEG_CHECK(p < s.size(), "RLE string ends inside a count");
      int c = static_cast<unsigned char>(s[p]) - 48;
      DETSEG_CHECK(c >= 0 && c < 64, "RLE string has character '", s[p], "' outside '0'..'o'");
      DETSEG_CHECK(k < 12, "RLE string has a count longer than 12 characters");
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= static_cast<int64_t>(-1) * (int64_t(1) << (5 * k));
    }
    // maskApi.c adds the count two back only from the fourth count on (m > 2): kept as is.
    if (counts.size() > 2) x += counts[counts.size() - 2];
    counts.push_back(static_cast<uint32_t>(x));
  }
  return make_rle(height, width, std::move(counts));
}

namespace {
constexpr double kPolygonScale = 5;  // rleFrPoly's upsampling
constexpr double kMaxPolygonSteps = 1 << 24;
}  // namespace

std::string mask_size_problem(int64_t height, int64_t width) {
  if (height < 0 || width < 0 || static_cast<double>(height) * static_cast<double>(width) >= 4294967296.0)
    return str("a ", width, "x", height, " image has no mask: masks hold at most 2^32 - 1 pixels (uint32 run lengths)");
  return "";
}

std::string polygon_problem(const double* xy, size_t k, int64_t height, int64_t width) {
  const std::string size_problem = mask_size_problem(height, width);
  if (!size_problem.empty()) return size_problem;
  // rleFrPoly walks int coordinates at 5x: beyond 4e8 they would not fit (a cast past INT_MAX).
  const double side_limit = 8.0 * static_cast<double>(std::max<int64_t>({height, width, 256}));
  const double limit = std::min(side_limit, 4e8);
  for (size_t j = 0; j < 2 * k; ++j)
    if (!std::isfinite(xy[j]) || std::fabs(xy[j]) > limit)
      return str("polygon coordinate ", xy[j], " is outside [-", limit, ", ", limit, "] (8x the ", width, "x",
                 height, " image's larger side", limit < side_limit ? ", 4e8 at most" : "", ")");
  double steps = 0;
  for (size_t j = 0; j < k; ++j) {
    const size_t next = (j + 1) % k;
    steps += kPolygonScale * std::max(std::fabs(xy[2 * j] - xy[2 * next]), std::fabs(xy[2 * j + 1] - xy[2 * next + 1])) + 1;
  }
  if (steps > kMaxPolygonSteps)
    return str("polygon edges are ", static_cast<int64_t>(steps / kPolygonScale), " pixels long in all (limit ",
               static_cast<int64_t>(kMaxPolygonSteps / kPolygonScale), ")");
  return "";
}

CocoRle rle_from_polygon(const double* xy, size_t k, int64_t height, int64_t width) {
  // Upsample by 5, walk every edge to get dense integer boundary points, keep the points where
  // the boundary crosses a pixel column centre, and turn those column/row starts into runs.
  const std::string problem = polygon_problem(xy, k, height, width);
  DETSEG_CHECK(problem.empty(), problem);
  const double scale = kPolygonScale;
  std::vector<int> x(k + 1), y(k + 1);
  for (size_t j = 0; j < k; ++j) x[j] = static_cast<int>(scale * xy[j * 2 + 0] + .5);
  for (size_t j = 0; j < k; ++j) y[j] = static_cast<int>(scale * xy[j * 2 + 1] + .5);
  if (k > 0) {
    x[k] = x[0];
    y[k] = y[0];
  }
  size_t m = 0;
  for (size_t j = 0; j < k; ++j)
    m += static_cast<size_t>(std::max(std::abs(x[j] - x[j + 1]), std::abs(y[j] - y[j + 1]))) + 1;
  std::vector<int> u, v;
  u.reserve(m);
  v.reserve(m);
  for (size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    // A repeated vertex (dx = dy = 0) gives pycocotools 0/0; its one point is never read (its u
    // equals its neighbours'), so a zero slope keeps the result and avoids casting NaN to int.
    const double s = dx >= dy ? (dx == 0 ? 0.0 : static_cast<double>(ye - ys) / dx) : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u.push_back(t + xs);
        v.push_back(static_cast<int>(ys + s * t + .5));
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v.push_back(t + ys);
        u.push_back(static_cast<int>(xs + s * t + .5));
      }
    }
  }
  std::vector<uint32_t> a;
  a.reserve(u.size() + 1);
  const double h = static_cast<double>(height);
  for (size_t j = 1; j < u.size(); ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = static_cast<double>(u[j] < u[j - 1] ? u[j] : u[j] - 1);
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > static_cast<double>(width - 1)) continue;
    double yd = static_cast<double>(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + .5) / scale - .5;
    if (yd < 0)
      yd = 0;
    else if (yd > h)
      yd = h;
    yd = std::ceil(yd);
    // In 64 bits, as maskApi.c computes it in double: x * height passes INT_MAX in a mask of more
    // than 2^31 pixels (the int product overflowed); the whole mask fits uint32.
    a.push_back(static_cast<uint32_t>(static_cast<int64_t>(xd) * height + static_cast<int64_t>(yd)));
  }
  a.push_back(static_cast<uint32_t>(height * width));
  std::sort(a.begin(), a.end());
  uint32_t previous = 0;
  for (auto& value : a) {
    const uint32_t t = value;
    value -= previous;
    previous = t;
  }
  // Zero-length runs are folded into the run before, as maskApi.c does.
  std::vector<uint32_t> b;
  b.reserve(a.size());
  size_t j = 0;
  b.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      b.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) b.back() += a[j++];
    }
  }
  return make_rle(height, width, std::move(b));
}

CocoRle rle_from_box(const double* box, int64_t height, int64_t width) {
  const double xs = box[0], xe = xs + box[2], ys = box[1], ye = ys + box[3];
  const double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
  return rle_from_polygon(xy, 4, height, width);
}

CocoRle rle_merge(const std::vector<CocoRle>& rles, bool intersect) {
  if (rles.empty()) return CocoRle{};
  if (rles.size() == 1) return rles[0];
  int64_t height = rles[0].height, width = rles[0].width;
  std::vector<uint32_t> counts = rles[0].counts, merged;
  for (size_t i = 1; i < rles.size(); ++i) {
    const CocoRle& other = rles[i];
    if (other.height != height || other.width != width) {
      // maskApi.c gives an empty 0x0 mask when sizes differ.
      return CocoRle{};
    }
    merged.clear();
    const auto& ac = counts;
    const auto& bc = other.counts;
    if (ac.empty() || bc.empty()) {
      counts = ac.empty() ? bc : ac;
      continue;
    }
    uint32_t ca = ac[0], cb = bc[0], cc = 0;
    bool va = false, vb = false, v = false;
    size_t ia = 1, ib = 1;
    uint64_t remaining = 1;
    while (remaining > 0) {
      const uint32_t c = std::min(ca, cb);
      cc += c;
      remaining = 0;
      ca -= c;
      if (!ca && ia < ac.size()) {
        ca = ac[ia++];
        va = !va;
      }
      remaining += ca;
      cb -= c;
      if (!cb && ib < bc.size()) {
        cb = bc[ib++];
        vb = !vb;
      }
      remaining += cb;
      const bool previous = v;
      v = intersect ? (va && vb) : (va || vb);
      if (v != previous || remaining == 0) {
        merged.push_back(cc);
        cc = 0;
      }
    }
    counts.swap(merged);
  }
  return make_rle(height, width, std::move(counts));
}

CocoRle segmentation_to_rle(const CocoSegmentation& segmentation, int64_t height, int64_t width) {
  switch (segmentation.kind) {
    case CocoSegmentation::kRle:
      return segmentation.rle;
    case CocoSegmentation::kPolygons: {
      const auto& polygons = segmentation.polygons;
      std::vector<CocoRle> parts;
      parts.reserve(polygons.size());
      // frPyObjects looks at the first list only: 4 numbers mean boxes, more mean polygons.
      const bool boxes = !polygons.empty() && polygons[0].size() == 4;
      for (const auto& poly : polygons) {
        if (boxes) {
          DETSEG_CHECK(poly.size() == 4, "segmentation mixes boxes and polygons");
          parts.push_back(rle_from_box(poly.data(), height, width));
        } else {
          parts.push_back(rle_from_polygon(poly.data(), poly.size() / 2, height, width));
        }
      }
      return rle_merge(parts);
    }
    case CocoSegmentation::kNone:
      break;
  }
  // No segmentation: an empty mask of the image's size.
  const std::string problem = mask_size_problem(height, width);
  DETSEG_CHECK(problem.empty(), problem);
  return make_rle(height, width, {static_cast<uint32_t>(height * width)});
}

uint64_t rle_area(const CocoRle& rle) {
  uint64_t area = 0;
  for (size_t j = 1; j < rle.counts.size(); j += 2) area += rle.counts[j];
  return area;
}

void rle_to_box(const CocoRle& rle, double* box) {
  const uint32_t h = static_cast<uint32_t>(rle.height), w = static_cast<uint32_t>(rle.width);
  const size_t m = (rle.counts.size() / 2) * 2;
  if (m == 0 || h == 0) {
    box[0] = box[1] = box[2] = box[3] = 0;
    return;
  }
  uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, xp = 0;
  for (size_t j = 0; j < m; ++j) {
    cc += rle.counts[j];
    const uint32_t t = cc - static_cast<uint32_t>(j % 2);
    const uint32_t y = t % h, x = (t - y) / h;
    if (j % 2 == 0) {
      xp = x;
    } else if (xp < x) {
      // The run wraps over a column boundary: it covers full columns' height.
      ys = 0;
      ye = h - 1;
    }
    xs = std::min(xs, x);
    xe = std::max(xe, x);
    ys = std::min(ys, y);
    ye = std::max(ye, y);
  }
  box[0] = xs;
  box[2] = xe - xs + 1;
  box[1] = ys;
  box[3] = ye - ys + 1;
}

double rle_iou(const CocoRle& dt, const CocoRle& gt, bool crowd) {
  if (dt.height != gt.height || dt.width != gt.width) return -1;
  if (dt.counts.empty() || gt.counts.empty()) return 0;
  uint32_t ca = dt.counts[0], cb = gt.counts[0];
  bool va = false, vb = false;
  size_t ia = 1, ib = 1;
  uint64_t inter = 0, uni = 0, remaining = 1;
  while (remaining > 0) {
    const uint32_t c = std::min(ca, cb);
    if (va || vb) {
      uni += c;
      if (va && vb) inter += c;
    }
    remaining = 0;
    ca -= c;
    if (!ca && ia < dt.counts.size()) {
      ca = dt.counts[ia++];
      va = !va;
    }
    remaining += ca;
    cb -= c;
    if (!cb && ib < gt.counts.size()) {
      cb = gt.counts[ib++];
      vb = !vb;
    }
    remaining += cb;
  }
  if (inter == 0)
    uni = 1;
  else if (crowd)
    uni = rle_area(dt);
  return static_cast<double>(inter) / static_cast<double>(uni);
}

double box_iou_coco(const double* d, const double* g, bool crowd) {
  // Same operation order as bbIou so results agree to the last bit.
  const double ga = g[2] * g[3], da = d[2] * d[3];
  const double w = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  if (h <= 0) return 0;
  const double i = w * h;
  const double u = crowd ? da : da + ga - i;
  return i / u;
}

}  // namespace detseg
