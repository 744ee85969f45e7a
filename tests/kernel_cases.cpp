// The cases of every kernel-list entry (kernel_cases.h). Sizes are awkward
// (not multiples of a vector width, a GEMM block or an OpenCL work group),
// rows are also wider than what one OpenCL work item or group takes, each
// entry has empty calls whose outputs must come back untouched, and each has
// a case of a few of the fast table's grains (fast.cpp: 2^14 elements, or
// rows holding as many; gemm.cpp: 2^18 multiply-adds) that it must split.
#include "kernel_cases.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <sstream>

namespace sf::testing {
namespace {

using namespace sf::kernels;
using Shape = std::vector<int64_t>;

const int64_t kSizes[] = {1, 7, 17, 63, 65, 129};
// Rows wider than one OpenCL work item's piece (256 columns) and a row
// kernel's group in GPU shapes (128 items), multiples of neither.
const int64_t kWide[] = {257, 1000, 4099};
// Three grains and a bit, cut at 2 and 3 threads in the middle of a vector.
constexpr int64_t kSplitElements = 3 * (1 << 14) + 37;
// A grain is 127 rows of 129 floats; 600 rows are also three of the blocks of
// 256 rows that column sums are added in (column_sums, layer_norm_backward).
constexpr int64_t kSplitRows = 600, kSplitCols = 129;
// A column long enough that GPU shapes sum it in blocks of about its square
// root (autograd/opencl/table.cpp: column_blocks): 33 blocks of 34, the last
// of 12, then the blocks' sums.
constexpr int64_t kLongColumn = 1100;

// A case's name from its parameters: named("rows", 3, "cols", 5) is "rows 3 cols 5".
template <class... Parts>
std::string named(const Parts&... parts) {
  std::ostringstream out;
  ((out << parts << ' '), ...);
  std::string s = out.str();
  if (!s.empty()) s.pop_back();
  return s;
}

// ---- inputs -------------------------------------------------------------------

}  // namespace

std::vector<float> random_vector(int64_t n, uint64_t seed, float low, float high) {
  std::vector<float> v(n);
  for (float& x : v) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = low + (high - low) * static_cast<float>(z >> 40) * 0x1.0p-24f;
  }
  return v;
}

namespace {

// Integers in [low, high], so that comparisons see equal values and maxima ties.
std::vector<int32_t> int_vector(int64_t n, uint64_t seed, int low, int high) {
  std::vector<int32_t> v(n);
  const std::vector<float> u = random_vector(n, seed, 0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) v[i] = low + std::min(high - low, static_cast<int>(u[i] * (high - low + 1)));
  return v;
}
std::vector<float> small_ints(int64_t n, uint64_t seed) {
  const std::vector<int32_t> ints = int_vector(n, seed, -3, 3);
  return {ints.begin(), ints.end()};
}

// The values that trip vectorised code: NaN, infinities, arguments where e^x
// overflows (> 88.72) or underflows to subnormals and to 0 (< -87.3, -103.97),
// huge and subnormal magnitudes, signed zeros.
const float kEdges[] = {NAN,    INFINITY, -INFINITY, 88.5f, 89.0f, -87.5f, -95.0f, -104.0f,
                        200.0f, -200.0f,  1e30f,     -1e30f, 0.0f, -0.0f, 1e-40f};
constexpr int kNumEdges = sizeof(kEdges) / sizeof(kEdges[0]);

}  // namespace

std::vector<float> with_edges(int64_t n, uint64_t seed, float low, float high) {
  std::vector<float> v = random_vector(n, seed, low, high);
  for (int64_t i = 0; i < n; i += 5) v[i] = kEdges[(i / 5 + seed) % kNumEdges];
  return v;
}

namespace {

// A [rows, cols] matrix where row r holds the edge value r % (kNumEdges + 1)
// at column (3 r) % cols (the last of each cycle stays clean): one per row,
// so that sums never mix two huge values, and a NaN or infinity shows
// whether it leaks into other rows. Column 0 is also covered, where a
// reference loop starts its maximum.
std::vector<float> edge_rows(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<float> x = random_vector(rows * cols, seed);
  for (int64_t r = 0; r < rows; ++r)
    if (r % (kNumEdges + 1) < kNumEdges) x[r * cols + (3 * r) % cols] = kEdges[r % (kNumEdges + 1)];
  return x;
}

// x [rows, cols] as [cols, rows].
std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

// The sums down the columns of x [rows, cols], in double.
std::vector<float> column_sums(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> sums(cols);
  for (int64_t c = 0; c < cols; ++c) {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) total += x[r * cols + c];
    sums[c] = static_cast<float>(total);
  }
  return sums;
}

// What an empty call's outputs hold: 42 where nothing may be written.
std::vector<float> poison() { return std::vector<float>(8, 42.0f); }

// ---- shapes -------------------------------------------------------------------

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The element strides of an operand of shape `a` broadcast to `out` (shapes
// aligned at their last dim): 0 along the dims it is broadcast along.
Shape broadcast_strides(const Shape& a, const Shape& out) {
  Shape strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t d = a.size() - 1 - i, o = out.size() - 1 - i;
    if (a[d] != 1) strides[o] = stride;
    stride *= a[d];
  }
  return strides;
}

// Two operands of shapes a and b, broadcast to `out`.
struct Broadcast {
  Shape a, b, out;
  Rows rows() const { return rows_view(out, {broadcast_strides(a, out), broadcast_strides(b, out)}); }
  std::string name() const { return named("a", a.size(), "b", b.size(), "out", numel(out)); }
};

// Full and full, full and a row (a bias), a column and full, full and a
// scalar, on [rows, cols]; the broadcasts of attention and of more dims; a
// split-sized one; empty ones.
std::vector<Broadcast> broadcasts() {
  std::vector<Broadcast> all;
  auto four_ways = [&](int64_t r, int64_t c) {
    all.push_back({{r, c}, {r, c}, {r, c}});
    all.push_back({{r, c}, {c}, {r, c}});
    all.push_back({{r, 1}, {r, c}, {r, c}});
    all.push_back({{r, c}, {}, {r, c}});
  };
  for (int64_t r : kSizes)
    for (int64_t c : kSizes) four_ways(r, c);
  four_ways(kSplitRows, kSplitCols);
  const Broadcast more[] = {
      {{2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}},
      {{3, 1, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}},
      {{5, 4099}, {4099}, {5, 4099}},
      {{2, 3, 1, 257}, {3, 5, 1}, {2, 3, 5, 257}},
      {{}, {63}, {63}},
      {{5, 1, 7}, {1, 3, 1}, {5, 3, 7}},
      {{2, 1, 3, 1, 2, 1, 2, 3}, {1, 2, 3, 2, 1, 2, 1, 3}, {2, 2, 3, 2, 2, 2, 2, 3}},  // 8 dims
      // 9 dims, none merged: 8 outer dims, Rows::kMaxDims
      {{2, 1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2, 1}, Shape(9, 2)},
      {{0, 5}, {5}, {0, 5}},
      {{3, 0}, {3, 0}, {3, 0}},
  };
  all.insert(all.end(), std::begin(more), std::end(more));
  return all;
}

bool split_sized(int64_t elements) { return elements >= kSplitRows * kSplitCols; }

// ---- cases shared by several entries --------------------------------------------

// The tolerance of float32 sums of up to k products of magnitude <= 4.
Tolerance gemm_tolerance(int64_t k) { return within(1e-4f, 1e-4f * std::max(1.0f, std::sqrt(k / 64.0f))); }

std::vector<bf16> to_bf16s(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), to_bf16);
  return out;
}

// The logits row kernels see: plain, the edge values, and very negative:
// near -1e4, where e^x underflows unless the row's max is subtracted first,
// and near -1e30, where x - max is still huge (one-hot rows).
// log_softmax's x - (max + log sum) rounds at the logits' magnitude: a few
// units in the last place of 1e4 for those near -1e4.
struct Logits {
  std::string name;
  std::vector<float> x;
  float log_atol;
};
std::vector<Logits> logits(int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  return {{"plain", random_vector(n, 6, -8, 8), 1e-5f},
          {"edges", edge_rows(rows, cols, 6), 1e-5f},
          {"near -1e4", random_vector(n, 6, -1e4f - 8, -1e4f + 8), 4e-3f},
          {"near -1e30", random_vector(n, 6, -3e30f, -1e30f), 1e-5f}};
}

// The [rows, cols] shapes of the row kernels: every pair of kSizes, the wide
// rows at 1 and 7 rows, and the split-sized one.
std::vector<std::pair<int64_t, int64_t>> row_shapes(const std::vector<int64_t>& cols_list) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t rows : kSizes)
    for (int64_t cols : cols_list) shapes.emplace_back(rows, cols);
  for (int64_t rows : {1, 7})
    for (int64_t cols : kWide) shapes.emplace_back(rows, cols);
  shapes.emplace_back(kSplitRows, kSplitCols);
  return shapes;
}
const std::vector<int64_t> kSizeList(std::begin(kSizes), std::end(kSizes));

// Attention scores [2, rows, cols] (x, then x reversed) with a key-padding
// mask [2, 1, cols], at scale 0.3; or plain softmax (no mask, scale 1).
struct Softmax {
  Rows rows;
  std::vector<float> x;
  std::vector<int32_t> keep;  // empty: no mask
  float scale;
};
std::vector<Softmax> softmaxes(int64_t rows, int64_t cols, const std::vector<float>& x) {
  std::vector<float> both = x;
  both.insert(both.end(), x.rbegin(), x.rend());
  std::vector<int32_t> keep(2 * cols);
  for (int64_t i = 0; i < 2 * cols; ++i) keep[i] = i % 5 != 2;
  return {{rows_view({rows, cols}, {{0, 0}}, true), x, {}, 1.0f},
          {rows_view({2, rows, cols}, {{cols, 0, 1}}, true), both, keep, 0.3f}};
}

// Attention's masks broadcast over [batch 2, heads 3, queries 5, keys], each
// with a fully hidden row.
std::vector<Softmax> attention_masks() {
  std::vector<Softmax> all;
  for (int64_t keys : {int64_t{7}, int64_t{257}, int64_t{1000}, int64_t{4099}}) {
    const Shape shape = {2, 3, 5, keys};
    for (const Shape& mask : {Shape{2, 1, 1, keys}, Shape{2, 1, 5, keys}, Shape{1, 1, 5, keys}, Shape{2, 3, 5, keys},
                              Shape{2, 1, 5, 1}}) {
      std::vector<int32_t> keep = int_vector(numel(mask), 51, 0, 1);
      std::fill(keep.begin(), keep.begin() + std::min(keys, numel(mask)), 0);
      all.push_back({rows_view(shape, {broadcast_strides(mask, shape)}, true), random_vector(numel(shape), 52, -5, 5),
                     keep, 0.35f});
    }
  }
  return all;
}

std::vector<float> scalar_masked_softmax(const Softmax& s) {
  std::vector<float> y(s.x.size());
  scalar_table().masked_softmax(s.x.data(), s.keep.empty() ? nullptr : s.keep.data(), s.rows, s.scale, y.data());
  return y;
}

// Targets of `rows` rows over `cols` classes, some of them `ignore`.
std::vector<int32_t> targets_for(int64_t rows, int64_t cols) {
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = r % 4 == 1 ? 1 : static_cast<int32_t>((r * 7) % cols);
  return targets;
}

// The layer-norm shapes and inputs: random, with edges, and (narrow rows) a
// constant first row, whose std is 0.
struct LayerNormInput {
  std::string name;
  int64_t rows, cols;
  std::vector<float> x, alpha, bias;
};
std::vector<LayerNormInput> layer_norm_inputs() {
  std::vector<LayerNormInput> all;
  for (auto [rows, cols] : row_shapes({2, 7, 17, 63, 65, 129})) {
    const std::vector<float> alpha = random_vector(cols, 12, 0.5f, 1.5f), bias = random_vector(cols, 13);
    std::vector<float> constant_row = random_vector(rows * cols, 10, -3, 3);
    std::fill(constant_row.begin(), constant_row.begin() + cols, 0.75f);
    all.push_back({named("rows", rows, "cols", cols), rows, cols, random_vector(rows * cols, 10, -3, 3), alpha, bias});
    if (split_sized(rows * cols)) continue;
    all.push_back({named("edges rows", rows, "cols", cols), rows, cols, edge_rows(rows, cols, 10), alpha, bias});
    if (cols < kWide[0])
      all.push_back({named("constant row, rows", rows, "cols", cols), rows, cols, constant_row, alpha, bias});
  }
  return all;
}

// Dropout's seeds and keep thresholds: none dropped, a quarter, most.
struct DropoutMask {
  uint32_t seed, threshold;
  float scale() const { return 1.0f / (1.0f - threshold / 4294967296.0f); }
};
const DropoutMask kDropoutMasks[] = {{99, 858993459u}, {0, 0u}, {1, 0x40000000u}, {0xdeadbeefu, 0xF0000000u}};

// The shapes of the elementwise row kernels: rows of kSizes, columns of the
// layer-norm widths, and the split-sized one.
std::vector<std::pair<int64_t, int64_t>> elementwise_shapes() { return row_shapes({2, 7, 17, 63, 65, 129}); }

// The embedding cases: a table of `vocab` rows of `dim`, `n` ids with repeats.
struct Embedding {
  int64_t vocab, n, dim;
  std::vector<int32_t> ids;
};
std::vector<Embedding> embeddings() {
  std::vector<Embedding> all;
  for (int64_t dim : {1, 63, 65}) all.push_back({6, 7, dim, {2, 0, 2, 5, 1, 2, 0}});
  for (int64_t vocab : {1, 17, 129})
    for (int64_t n : {1, 7, 65})
      for (int64_t dim : {1, 17, 64, 257, 1000, 4099})
        all.push_back({vocab, n, dim, int_vector(n, 122, 0, static_cast<int>(vocab) - 1)});
  std::vector<int32_t> split_ids(kSplitRows);
  for (int64_t i = 0; i < kSplitRows; ++i) split_ids[i] = static_cast<int32_t>(i * 7 % 50);
  all.push_back({50, kSplitRows, kSplitCols, split_ids});
  // GPU shapes' buckets of ids (autograd/opencl/table.cpp: scatter_add_rows),
  // each holding several ids, repeated: 64 buckets of 256 columns, 2048 of 8.
  all.push_back({1000, 2048, 256, int_vector(2048, 126, 0, 999)});
  all.push_back({3000, 2100, 8, int_vector(2100, 127, 0, 2999)});
  return all;
}

}  // namespace

KernelCase gemm_case(const GemmShape& g, GemmEntry entry) {
  const int64_t lda = (g.trans_a ? g.m : g.k) + g.pad, ldb = (g.trans_b ? g.k : g.n) + g.pad, ldc = g.n + g.pad;
  const int64_t size_a = (g.trans_a ? g.k : g.m) * lda, size_b = (g.trans_b ? g.n : g.k) * ldb, size_c = g.m * ldc;
  const int64_t stride_b = g.shared_b ? 0 : size_b;
  std::vector<float> a = random_vector(size_a * g.batch, g.m + g.n), b = random_vector(stride_b ? size_b * g.batch : size_b, g.k + 3);
  if (g.edges) {
    const float specials[] = {INFINITY, -INFINITY, NAN};
    for (size_t i = 5; i < a.size(); i += 331) a[i] = specials[i % 3];
    for (size_t i = 7; i < b.size(); i += 313) b[i] = specials[i % 3];
  }
  const std::vector<float> c = g.beta == 0.0f ? std::vector<float>(size_c * g.batch, NAN) : random_vector(size_c * g.batch, 7);
  KernelCase kc(named("m", g.m, "n", g.n, "k", g.k, "trans_a", g.trans_a, "trans_b", g.trans_b, "alpha", g.alpha, "beta",
                  g.beta, "batch", g.batch, "pad", g.pad, "shared_b", g.shared_b, "edges", g.edges), g.split);
  const bool empty = g.m == 0 || g.n == 0 || g.batch == 0;
  const Arg<float> out = empty ? kc.untouched(c) : kc.output(c, gemm_tolerance(g.k));
  if (entry == GemmEntry::kBf16) {
    const Arg<bf16> pa = kc.input(to_bf16s(a)), pb = kc.input(to_bf16s(b));
    kc.call = [=](const Table& t, const Placed& p) {
      t.gemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, p[pa], lda, size_a, p[pb], ldb, stride_b, g.beta,
                  p[out], ldc, size_c, g.batch);
    };
  } else {
    const Arg<float> pa = kc.input(a), pb = kc.input(b);
    const auto product = entry == GemmEntry::kRoundedBf16 ? &Table::gemm_rounded_bf16 : &Table::gemm;
    kc.call = [=](const Table& t, const Placed& p) {
      (t.*product)(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, p[pa], lda, size_a, p[pb], ldb, stride_b, g.beta,
                   p[out], ldc, size_c, g.batch);
    };
  }
  return kc;
}

namespace cases {
namespace {

// The products both gemm entries run: the split-sized ones, k past their K
// blocking (gemm 512, gemm_bf16 1024) so that a second K block adds into C.
// A tall product is cut across its rows (one thread packs B where each of 2
// or 3 reads it in place, gemm.cpp's kPackBRows), a wide one across its
// columns, one of 3 rows (gemm_few_rows) into blocks of columns of which
// `few_rows_n` makes five or more; batch 1 is cut into parts, batch 3 too.
// Then the empty ones (m, n or the batch 0; k 0 is C = beta C).
void add_split_and_empty(Cases& all, GemmEntry entry, int64_t k, int64_t few_rows_n) {
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{136, 17}, {17, 136}, {3, few_rows_n}})
    for (int64_t batch : {1, 3})
      for (int layout = 0; layout < 4; ++layout)
        all.push_back(gemm_case({m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 3 ? 0.0f : 1.5f, batch,
                                 /*pad=*/1, /*shared_b=*/false, /*edges=*/false, /*split=*/true},
                                entry));
  for (const GemmShape& g : {GemmShape{0, 5, 3, false, false, 1.0f, 0.0f, 1}, GemmShape{4, 0, 3, false, true, 1.0f, 0.0f, 1},
                             GemmShape{4, 5, 3, true, false, 1.0f, 0.0f, 0}})
    all.push_back(gemm_case(g, entry));
}

// Edge values in A and B, sparse enough that some rows and columns of C stay finite.
void add_edges(Cases& all, GemmEntry entry, std::initializer_list<int64_t> ns, std::initializer_list<int64_t> ks) {
  for (int64_t m : {3, 17, 65})
    for (int64_t n : ns)
      for (int64_t k : ks)
        for (int layout = 0; layout < 4; ++layout) {
          GemmShape g{m, n, k, bool(layout & 1), bool(layout & 2), 1.0f, 0.5f};
          g.edges = true;
          all.push_back(gemm_case(g, entry));
        }
}

}  // namespace

// Every layout, awkward sizes, alpha and beta, strided and shared batches;
// few rows (decoding's path) with padded leading dimensions; each blocking
// of OpenCL's kernels (autograd/opencl/gemm.h: n a multiple of 32, n > 256
// not a multiple of 64).
Cases gemm() {
  Cases all;
  for (int layout = 0; layout < 4; ++layout) {
    const bool ta = layout & 1, tb = layout & 2;
    for (int64_t m : kSizes)
      for (int64_t n : kSizes)
        for (int64_t k : {0, 1, 17, 65, 129})
          all.push_back(gemm_case({m, n, k, ta, tb, 0.5f, layout == 3 ? 0.0f : 1.5f, 2, 0, /*shared_b=*/true}, GemmEntry::kFloat32));
    for (int64_t m : {1, 2, 3, 4, 5})
      for (int64_t n : {1, 63, 64, 130, 4000})
        for (int64_t k : {1, 17, 128})
          all.push_back(gemm_case({m, n, k, ta, tb, 1.0f, layout == 1 ? 0.0f : 0.5f, 3, 3}, GemmEntry::kFloat32));
    for (const GemmShape& g : {GemmShape{7, 17, 5, ta, tb, 0.5f, 1.5f, 3}, GemmShape{1, 1, 1, ta, tb, -2.0f, 0.25f, 2, 0, true},
                               GemmShape{64, 64, 64, ta, tb, 0.125f, 0.0f, 5}, GemmShape{65, 129, 17, ta, tb, 1.0f, 1.0f, 3, 3, true},
                               GemmShape{129, 130, 67, ta, tb, 1.0f, -1.0f, 1, 5}, GemmShape{32, 32, 32, ta, tb, 1.0f, 0.0f, 6},
                               GemmShape{33, 96, 31, ta, tb, 1.0f, 0.5f, 2, 2}, GemmShape{13, 300, 40, ta, tb, 1.0f, 0.0f, 1}})
      all.push_back(gemm_case(g, GemmEntry::kFloat32));
  }
  add_edges(all, GemmEntry::kFloat32, {7, 65, 129}, {17, 129});
  add_split_and_empty(all, GemmEntry::kFloat32, 521, 1700);
  return all;
}

// As gemm, with k odd and past the K blocking (1024); subnormal operands
// (below 2^-126), which AVX512-BF16 reads as zero: their products are below
// 2^-126 times the other operand, within the case's atol of the reference.
Cases gemm_bf16() {
  Cases all;
  for (int layout = 0; layout < 4; ++layout) {
    for (int64_t m : kSizes)
      for (int64_t n : {1, 17, 65, 129})
        for (int64_t k : {0, 1, 2, 17, 64, 129})
          all.push_back(gemm_case({m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 3 ? 0.0f : 1.5f, 2,
                                   /*pad=*/layout, /*shared_b=*/layout == 1},
                                  GemmEntry::kBf16));
    for (int64_t k : {1024, 1031, 2049})
      all.push_back(gemm_case({37, 70, k, bool(layout & 1), bool(layout & 2), 1.0f, 0.0f, 3, 1}, GemmEntry::kBf16));
  }
  add_edges(all, GemmEntry::kBf16, {7, 65}, {17, 130});
  add_split_and_empty(all, GemmEntry::kBf16, 1031, 700);

  const int64_t m = 9, n = 33, k = 19;
  std::vector<float> a = random_vector(m * k, 5), b = random_vector(k * n, 6);
  for (size_t i = 0; i < a.size(); i += 3) a[i] = (i % 2 ? 1 : -1) * 0x1.8p-130f;
  for (size_t i = 1; i < b.size(); i += 4) b[i] = 0x1p-133f;
  KernelCase kc("subnormal operands");
  const Arg<bf16> pa = kc.input(to_bf16s(a)), pb = kc.input(to_bf16s(b));
  const Arg<float> out = kc.output(std::vector<float>(m * n), within(1e-5f, 1e-36f));
  kc.call = [=](const Table& t, const Placed& p) {
    t.gemm_bf16(false, false, m, n, k, 1.0f, p[pa], k, 0, p[pb], n, 0, 0.0f, p[out], n, 0, 1);
  };
  all.push_back(kc);
  return all;
}

// Float32 operands rounded as they are read: each layout at sizes on both
// sides of the micro-kernels' tiles and the K blocking (512), with padded
// leading dimensions and a shared B; few rows (B rounded in registers, every
// B layout); the split and empty products; edge values, which rounding must
// keep (infinities stay, NaN stays NaN). Random operands are not bf16 values,
// so a kernel that skipped the rounding would be off by ~2^-9 of each product.
Cases gemm_rounded_bf16() {
  Cases all;
  for (int layout = 0; layout < 4; ++layout) {
    const bool ta = layout & 1, tb = layout & 2;
    for (int64_t m : {1, 4, 5, 9, 33, 130})
      for (int64_t n : {1, 17, 33, 65})
        for (int64_t k : {1, 17, 129, 521})
          all.push_back(gemm_case({m, n, k, ta, tb, 0.5f, layout == 3 ? 0.0f : 1.5f, 2, /*pad=*/layout,
                                   /*shared_b=*/layout == 1},
                                  GemmEntry::kRoundedBf16));
    all.push_back(gemm_case({2, 4000, 128, ta, tb, 1.0f, 0.5f, 3, 3}, GemmEntry::kRoundedBf16));
  }
  add_edges(all, GemmEntry::kRoundedBf16, {7, 65}, {17, 129});
  add_split_and_empty(all, GemmEntry::kRoundedBf16, 521, 1700);
  return all;
}

// Every code, on inputs in [0.1, 4) (where log, sqrt and pow are defined) and
// with the edge values. Results below FLT_MIN are subnormal, with fewer
// significant bits: they may differ by a unit in their last place.
Cases unary() {
  Cases all;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{129}, int64_t{40000}, kSplitElements})
    for (const auto& [input, x] : {std::pair{"positive", random_vector(n, 3, 0.1f, 4.0f)}, {"edges", with_edges(n, 3)}})
      for (Unary op : kUnaryCodes) {
        KernelCase kc(named("n", n, input, "code", static_cast<int>(op)), n == kSplitElements);
        const Arg<float> px = kc.input(x);
        const Arg<float> py = kc.result(n, within(2e-6f, FLT_MIN));
        kc.call = [=](const Table& t, const Placed& p) { t.unary(op, p[px], p[py], n, 1.5f); };
        all.push_back(kc);
      }
  return all;
}

// Every code, broadcast every way, on random operands (b away from 0) and on
// the edge values.
Cases binary() {
  Cases all;
  for (const Broadcast& shapes : broadcasts())
    for (bool edges : {false, true})
      for (Binary op : kBinaryCodes) {
        const int64_t na = numel(shapes.a), nb = numel(shapes.b), n = numel(shapes.out);
        KernelCase kc(named(shapes.name(), "edges", edges, "code", static_cast<int>(op)), split_sized(n));
        const Arg<float> pa = kc.input(edges ? with_edges(na, 1) : random_vector(na, 1));
        const Arg<float> pb = kc.input(edges ? with_edges(nb, 2) : random_vector(nb, 2, 0.5f, 2));
        const Arg<float> out = kc.result(n, within(0, 0));
        const Rows rows = shapes.rows();
        kc.call = [=](const Table& t, const Placed& p) { t.binary(op, p[pa], p[pb], p[out], rows); };
        all.push_back(kc);
      }
  return all;
}

// Every code, broadcast every way, on the edge values and on small integers
// (equal values).
Cases predicate() {
  Cases all;
  for (const Broadcast& shapes : broadcasts())
    for (bool edges : {false, true})
      for (Predicate op : kPredicateCodes) {
        const int64_t na = numel(shapes.a), nb = numel(shapes.b), n = numel(shapes.out);
        KernelCase kc(named(shapes.name(), "edges", edges, "code", static_cast<int>(op)));
        const Arg<float> pa = kc.input(edges ? with_edges(na, 1) : small_ints(na, 11));
        const Arg<float> pb = kc.input(edges ? with_edges(nb, 2) : small_ints(nb, 12));
        const Arg<int32_t> out = kc.output(std::vector<int32_t>(n, 7), kExact);
        const Rows rows = shapes.rows();
        kc.call = [=](const Table& t, const Placed& p) { t.predicate(op, p[pa], p[pb], p[out], rows); };
        all.push_back(kc);
      }
  return all;
}

Cases predicate_int() {
  Cases all;
  for (const Broadcast& shapes : broadcasts())
    for (Predicate op : kPredicateCodes) {
      const int64_t n = numel(shapes.out);
      KernelCase kc(named(shapes.name(), "code", static_cast<int>(op)));
      const Arg<int32_t> pa = kc.input(int_vector(numel(shapes.a), 13, -2, 2));
      const Arg<int32_t> pb = kc.input(int_vector(numel(shapes.b), 14, -2, 2));
      const Arg<int32_t> out = kc.output(std::vector<int32_t>(n, 7), kExact);
      const Rows rows = shapes.rows();
      kc.call = [=](const Table& t, const Placed& p) { t.predicate_int(op, p[pa], p[pb], p[out], rows); };
      all.push_back(kc);
    }
  return all;
}

// x of the first shape, the condition of the second.
Cases fill_where() {
  Cases all;
  for (const Broadcast& shapes : broadcasts()) {
    const int64_t n = numel(shapes.out);
    KernelCase kc(shapes.name(), split_sized(n));
    const Arg<float> x = kc.input(with_edges(numel(shapes.a), 1));
    const Arg<int32_t> where = kc.input(int_vector(numel(shapes.b), 15, 0, 1));
    const Arg<float> out = kc.result(n, kExact);
    const Rows rows = shapes.rows();
    kc.call = [=](const Table& t, const Placed& p) { t.fill_where(p[x], p[where], -1e9f, p[out], rows); };
    all.push_back(kc);
  }
  return all;
}

Cases bias_relu() {
  Cases all;
  auto add = [&](int64_t rows, int64_t cols, const std::vector<float>& x) {
    KernelCase kc(named("rows", rows, "cols", cols), split_sized(rows * cols));
    const Arg<float> px = kc.input(x), bias = kc.input(random_vector(cols, 13));
    const Arg<float> y = kc.result(rows * cols, kExact);
    kc.call = [=](const Table& t, const Placed& p) { t.bias_relu(p[px], p[bias], rows, cols, p[y]); };
    all.push_back(kc);
  };
  for (auto [rows, cols] : elementwise_shapes()) add(rows, cols, edge_rows(rows, cols, 10));
  add(0, 4, {});
  add(3, 0, {});
  return all;
}

// From relu's output, and from inputs with every sign and edge value.
Cases relu_backward() {
  Cases all;
  auto add = [&](int64_t n, const std::vector<float>& y) {
    KernelCase kc(named("n", n), split_sized(n));
    const Arg<float> py = kc.input(y), dy = kc.input(random_vector(n, 11));
    const Arg<float> dx = kc.result(n, kExact);
    kc.call = [=](const Table& t, const Placed& p) { t.relu_backward(p[py], p[dy], p[dx], n); };
    all.push_back(kc);
  };
  for (auto [rows, cols] : elementwise_shapes()) {
    const std::vector<float> x = edge_rows(rows, cols, 10);
    std::vector<float> y(x.size());
    const std::vector<float> bias = random_vector(cols, 13);
    scalar_table().bias_relu(x.data(), bias.data(), rows, cols, y.data());
    add(rows * cols, y);
    add(rows * cols, x);
  }
  add(0, {});
  return all;
}

// Masks are compared bit for bit: every backend keeps the same elements.
Cases dropout() {
  Cases all;
  auto add = [&](int64_t n, DropoutMask mask) {
    KernelCase kc(named("n", n, "seed", mask.seed, "threshold", mask.threshold), split_sized(n));
    const Arg<float> x = kc.input(with_edges(n, 10, -3, 3));
    const Arg<float> y = kc.result(n, kExact);
    kc.call = [=](const Table& t, const Placed& p) { t.dropout(p[x], p[y], n, mask.scale(), mask.seed, mask.threshold); };
    all.push_back(kc);
  };
  for (auto [rows, cols] : elementwise_shapes())
    for (DropoutMask mask : kDropoutMasks) add(rows * cols, mask);
  add(0, kDropoutMasks[2]);
  return all;
}

Cases dropout_add() {
  Cases all;
  auto add = [&](int64_t n, DropoutMask mask) {
    KernelCase kc(named("n", n, "seed", mask.seed, "threshold", mask.threshold), split_sized(n));
    const Arg<float> x = kc.input(random_vector(n, 11)), y = kc.input(with_edges(n, 10, -3, 3));
    const Arg<float> out = kc.result(n, kExact);
    kc.call = [=](const Table& t, const Placed& p) {
      t.dropout_add(p[x], p[y], p[out], n, mask.scale(), mask.seed, mask.threshold);
    };
    all.push_back(kc);
  };
  for (auto [rows, cols] : elementwise_shapes())
    for (DropoutMask mask : kDropoutMasks) add(rows * cols, mask);
  add(0, kDropoutMasks[2]);
  return all;
}

// Over a middle axis, over broadcast dims, down columns and along rows
// (the last two also against sums computed here: the fast table hands shapes
// that collapse to a dim of 1 to the reference's code). Outputs start as NaN:
// sum_to overwrites them. x is never empty (kernels.h).
Cases sum_to() {
  Cases all;
  auto add = [&](const Shape& x_shape, const Shape& out_shape, const std::vector<float>& x,
                 const std::vector<float>& want) {
    KernelCase kc(named("x", numel(x_shape), "out", numel(out_shape), "dims", x_shape.size()));
    // [48, 33, 31]: a grain is 16 of the outer.
    kc.split_passes = split_sized(numel(x_shape)) || x_shape == Shape{48, 33, 31};
    const Arg<float> px = kc.input(x);
    const std::vector<float> before(numel(out_shape), NAN);
    // Float sums of n values of magnitude <= 2: the bound grows with sqrt(n).
    const float summed = static_cast<float>(numel(x_shape) / std::max<int64_t>(1, numel(out_shape)));
    const Tolerance tolerance = within(1e-5f, 1e-5f * std::max(1.0f, std::sqrt(summed / 64)));
    const Arg<float> out = want.empty() ? kc.output(before, tolerance) : kc.output(before, tolerance, want);
    const Rows rows = rows_view(x_shape, {broadcast_strides(x_shape, x_shape), broadcast_strides(out_shape, x_shape)});
    kc.call = [=](const Table& t, const Placed& p) { t.sum_to(p[px], p[out], rows); };
    all.push_back(kc);
  };
  for (int64_t outer : kSizes)
    for (int64_t n : kSizes)
      for (int64_t inner : {1, 7, 65}) {
        add({outer, n, inner}, {outer, 1, inner}, random_vector(outer * n * inner, 4), {});
        // One edge value per sum at inner 1, so that no sum mixes two huge values.
        add({outer, n, inner}, {outer, 1, inner}, edge_rows(outer * inner, n, 4), {});
      }
  // The edge values one per sum here too: down the columns, edge_rows
  // transposed (1e30 and -1e30 in one column would leave only what a given
  // order adds after both, and GPU shapes add in blocks).
  for (int64_t rows : kSizes)
    for (int64_t cols : kSizes) {
      const std::vector<float> random = random_vector(rows * cols, 5);
      for (const std::vector<float>& x : {random, transposed(edge_rows(cols, rows, 5), cols, rows)})
        add({rows, cols}, {cols}, x, column_sums(x, rows, cols));
      for (const std::vector<float>& x : {random, edge_rows(rows, cols, 5)})
        add({rows, cols}, {rows, 1}, x, column_sums(transposed(x, rows, cols), cols, rows));
    }
  const std::pair<Shape, Shape> more[] = {
      {{2, 3, 4, 5}, {3, 1, 5}}, {{2, 3, 4, 5}, {}},    {{2, 3, 4, 5}, {2, 1, 4, 1}},
      {{2, 3, 4, 5}, {2, 3, 4, 5}}, {{2, 3, 4, 5}, {5}}, {{3, 4099}, {4099}},
      {{7, 1000}, {7, 1}},          {{2, 5, 257}, {2, 1, 257}},
      {{kSplitRows, kSplitCols}, {kSplitRows, 1}}, {{kSplitRows, kSplitCols}, {kSplitCols}}, {{48, 33, 31}, {48, 1, 31}},
      // Sums long enough for GPU shapes' blocks, which also cut across the
      // rows of the summed dims (40 of 50, 30 of 40 over two dims).
      {{kLongColumn, 3}, {3}}, {{40, 3, 50, 5}, {3, 1, 5}}, {{5, 2, 6, 3, 40, 2}, {2, 1, 3, 1, 2}}};
  for (const auto& [x_shape, out_shape] : more) add(x_shape, out_shape, random_vector(numel(x_shape), 31), {});
  return all;
}

// With and without the index of the first maximum (a NaN is the maximum).
Cases max_axis() {
  Cases all;
  auto add = [&](int64_t outer, int64_t n, int64_t inner, const std::vector<float>& x, bool with_arg) {
    KernelCase kc(named("outer", outer, "n", n, "inner", inner, "arg", with_arg), split_sized(outer * n * inner) && inner == 1 && !with_arg);
    const Arg<float> px = kc.input(x);
    const Arg<float> out = kc.result(outer * inner, kExact);
    if (with_arg) {
      const Arg<int32_t> arg = kc.output(std::vector<int32_t>(outer * inner, -1), kExact);
      kc.call = [=](const Table& t, const Placed& p) { t.max_axis(p[px], outer, n, inner, p[out], p[arg]); };
    } else {
      kc.call = [=](const Table& t, const Placed& p) { t.max_axis(p[px], outer, n, inner, p[out], {}); };
    }
    all.push_back(kc);
  };
  for (int64_t outer : kSizes)
    for (int64_t n : kSizes) add(outer, n, 1, edge_rows(outer, n, 4), false);
  for (int64_t outer : {1, 7})
    for (int64_t n : {1, 17, 129, 257, 1000, 4099})
      for (int64_t inner : {1, 65}) {
        std::vector<float> x = small_ints(outer * n * inner, 33);
        for (size_t i = 3; i < x.size(); i += 11) x[i] = kEdges[(i / 11) % 3];
        for (bool with_arg : {false, true}) add(outer, n, inner, x, with_arg);
      }
  add(kSplitRows, kSplitCols, 1, random_vector(kSplitRows * kSplitCols, 4), false);
  add(0, 3, 1, {}, false);
  return all;
}

// Accumulated in double: the tolerance is relative to the sum of |a b|, the
// scale a float sum's rounding is measured on. One infinity, then also a NaN.
Cases dot() {
  Cases all;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1025}, int64_t{4097}, int64_t{70001},
                    int64_t{1000003}, kSplitElements})
    for (float edge : {0.0f, -INFINITY, NAN}) {
      std::vector<float> a = random_vector(n, 16), b = random_vector(n, 17);
      if (n == 0 && edge != 0.0f) continue;
      if (edge != 0.0f) a[n / 2] = edge;
      double scale = 0.0;
      for (int64_t i = 0; i < n; ++i) scale += std::fabs(double(a[i]) * b[i]);
      KernelCase kc(named("n", n, "edge", edge), n == kSplitElements && edge == 0.0f);
      const Arg<float> pa = kc.input(a), pb = kc.input(b);
      const Tolerance tolerance = within(1e-5f, static_cast<float>(1e-6 * scale));
      const Arg<float> out = n ? kc.output(std::vector<float>{NAN}, tolerance)
                               : kc.output(std::vector<float>{NAN}, kExact, std::vector<float>{0.0f});
      kc.call = [=](const Table& t, const Placed& p) { t.dot(p[pa], p[pb], n, p[out]); };
      all.push_back(kc);
    }
  return all;
}

// Largest first, ties to the lower index: on edge values (but NaN, which
// kernels.h gives no place in the order) and on small integers.
Cases topk() {
  Cases all;
  auto add = [&](int64_t rows, int64_t cols, int64_t k, const std::vector<float>& x) {
    KernelCase kc(named("rows", rows, "cols", cols, "k", k));
    const Arg<float> px = kc.input(x);
    const Arg<float> values = kc.result(rows * k, kExact);
    const Arg<int32_t> indices = kc.output(std::vector<int32_t>(rows * k, -1), kExact);
    kc.call = [=](const Table& t, const Placed& p) { t.topk(p[px], rows, cols, k, p[values], p[indices]); };
    all.push_back(kc);
  };
  for (int64_t cols : kSizes) {
    std::vector<float> x = edge_rows(3, cols, 19);
    std::replace_if(x.begin(), x.end(), [](float v) { return std::isnan(v); }, 0.5f);
    add(3, cols, std::min<int64_t>(cols, 5), x);
  }
  for (int64_t rows : {1, 7, 65})
    for (int64_t cols : {1, 7, 129, 257, 1000, 4099})
      for (int64_t k : {1, 4})
        if (k <= cols) add(rows, cols, k, small_ints(rows * cols, 101));
  add(kSplitRows, kSplitCols, 5, random_vector(kSplitRows * kSplitCols, 20));
  add(0, 5, 2, {});
  return all;
}

Cases log_softmax() {
  Cases all;
  auto add = [&](int64_t rows, int64_t cols, const Logits& x) {
    KernelCase kc(named("rows", rows, "cols", cols, x.name), split_sized(rows * cols));
    const Arg<float> px = kc.input(x.x);
    const Arg<float> y =
        kc.result(rows * cols, within(1e-5f, x.log_atol));
    kc.call = [=](const Table& t, const Placed& p) { t.log_softmax(p[px], p[y], rows, cols); };
    all.push_back(kc);
  };
  for (auto [rows, cols] : row_shapes(kSizeList))
    for (const Logits& x : logits(rows, cols)) add(rows, cols, x);
  add(0, 5, {"empty", {}, 0});
  add(3, 0, {"empty", {}, 0});
  return all;
}

// dx = dy - exp(y) sum(dy), from the reference's forward output.
Cases log_softmax_backward() {
  Cases all;
  auto add = [&](int64_t rows, int64_t cols, const std::vector<float>& y) {
    KernelCase kc(named("rows", rows, "cols", cols), split_sized(rows * cols));
    const Arg<float> py = kc.input(y), dy = kc.input(random_vector(rows * cols, 7));
    const Arg<float> dx =
        kc.result(rows * cols, within(1e-4f, 1e-5f));
    kc.call = [=](const Table& t, const Placed& p) { t.log_softmax_backward(p[py], p[dy], p[dx], rows, cols); };
    all.push_back(kc);
  };
  for (auto [rows, cols] : row_shapes(kSizeList))
    for (const Logits& x : logits(rows, cols)) {
      std::vector<float> y(x.x.size());
      scalar_table().log_softmax(x.x.data(), y.data(), rows, cols);
      add(rows, cols, y);
    }
  add(0, 5, {});
  return all;
}

// Plain softmax, attention's scores with a key-padding mask, and attention's
// broadcast masks; empty rows and rows of no columns.
std::vector<Softmax> every_softmax() {
  std::vector<Softmax> all;
  for (auto [rows, cols] : row_shapes(kSizeList))
    for (const Logits& x : logits(rows, cols))
      for (const Softmax& s : softmaxes(rows, cols, x.x)) all.push_back(s);
  for (const Softmax& s : attention_masks()) all.push_back(s);
  for (const Rows& empty : {rows_view({2, 3, 0}, {{0, 0, 1}}, true), rows_view({2, 0, 4}, {{0, 0, 1}}, true)})
    all.push_back({empty, {}, {1}, 1.0f});
  return all;
}

Cases masked_softmax() {
  Cases all;
  for (const Softmax& s : every_softmax()) {
    const int64_t n = static_cast<int64_t>(s.x.size());
    KernelCase kc(named("rows", s.rows.count, "cols", s.rows.cols, "mask", s.keep.size(), "scale", s.scale), split_sized(n));
    const Arg<float> x = kc.input(s.x);
    const Arg<int32_t> keep = kc.input(s.keep);
    const Arg<float> y = kc.result(n, within(1e-5f, 1e-7f));
    const bool masked = !s.keep.empty();
    kc.call = [=](const Table& t, const Placed& p) {
      t.masked_softmax(p[x], masked ? p[keep] : Mem<const int32_t>(), s.rows, s.scale, p[y]);
    };
    all.push_back(kc);
  }
  return all;
}

Cases masked_softmax_backward() {
  Cases all;
  for (const Softmax& s : every_softmax()) {
    const int64_t n = static_cast<int64_t>(s.x.size());
    KernelCase kc(named("rows", s.rows.count, "cols", s.rows.cols, "mask", s.keep.size(), "scale", s.scale), split_sized(n));
    const Arg<float> y = kc.input(scalar_masked_softmax(s)), dy = kc.input(random_vector(n, 9));
    const Arg<int32_t> keep = kc.input(s.keep);
    const Arg<float> dx = kc.result(n, within(1e-4f, 1e-6f));
    const bool masked = !s.keep.empty();
    kc.call = [=](const Table& t, const Placed& p) {
      t.masked_softmax_backward(p[y], p[dy], masked ? p[keep] : Mem<const int32_t>(), s.rows, s.scale, p[dx]);
    };
    all.push_back(kc);
  }
  return all;
}

Cases layer_norm() {
  Cases all;
  for (const LayerNormInput& in : layer_norm_inputs()) {
    const int64_t rows = in.rows, cols = in.cols;
    KernelCase kc(in.name, split_sized(rows * cols));
    const Arg<float> x = kc.input(in.x), alpha = kc.input(in.alpha), bias = kc.input(in.bias);
    const Arg<float> y = kc.output(std::vector<float>(rows * cols), within(1e-5f, 1e-5f));
    const Arg<float> mean = kc.output(std::vector<float>(rows), within(1e-5f, 1e-5f));
    const Arg<float> stdev = kc.output(std::vector<float>(rows), within(1e-5f, 1e-6f));
    kc.call = [=](const Table& t, const Placed& p) {
      t.layer_norm(p[x], p[alpha], p[bias], rows, cols, 1e-6f, p[y], p[mean], p[stdev]);
    };
    all.push_back(kc);
  }
  KernelCase empty("zero rows");
  const Arg<float> none = empty.input(std::vector<float>{}), out = empty.untouched(poison());
  empty.call = [=](const Table& t, const Placed& p) {
    t.layer_norm(p[none], p[none], p[none], 0, 4, 1e-6f, p[out], p[out], p[out]);
  };
  all.push_back(empty);
  return all;
}

// dx is a difference of terms of size |dy alpha| / std, which cancel almost
// entirely in a row of two close values: each row at its own scale. Over
// zero rows the parameters' gradients are 0.
Cases layer_norm_backward() {
  Cases all;
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& x,
                 const std::vector<float>& alpha, const std::vector<float>& bias) {
    std::vector<float> y(rows * cols), mean(rows), stdev(rows);
    scalar_table().layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, y.data(), mean.data(),
                              stdev.data());
    Tolerance dx_tolerance = within(1e-4f, 0);
    for (float s : stdev) dx_tolerance.row_atol.push_back(1e-5f / (s + 1e-6f));
    KernelCase kc(name, split_sized(rows * cols) ? 2 : 0);  // dx by rows, then dalpha and dbias by blocks of rows
    const Arg<float> px = kc.input(x), pa = kc.input(alpha), pm = kc.input(mean), ps = kc.input(stdev),
                     dy = kc.input(random_vector(rows * cols, 11));
    const Arg<float> dx = kc.result(rows * cols, dx_tolerance);
    const std::vector<float> before(cols, 42.0f);
    const Arg<float> dalpha = rows ? kc.output(before, within(1e-4f, 1e-4f))
                                   : kc.output(before, kExact, std::vector<float>(cols, 0.0f));
    const Arg<float> dbias = rows ? kc.output(before, within(1e-4f, 1e-4f))
                                  : kc.output(before, kExact, std::vector<float>(cols, 0.0f));
    kc.call = [=](const Table& t, const Placed& p) {
      t.layer_norm_backward(p[px], p[pa], p[pm], p[ps], p[dy], rows, cols, 1e-6f, p[dx], p[dalpha], p[dbias]);
    };
    all.push_back(kc);
  };
  for (const LayerNormInput& in : layer_norm_inputs()) add(in.name, in.rows, in.cols, in.x, in.alpha, in.bias);
  add(named("rows", kLongColumn, "cols", 20), kLongColumn, 20, random_vector(kLongColumn * 20, 10, -3, 3),
      random_vector(20, 12, 0.5f, 1.5f), random_vector(20, 13));
  add("zero rows", 0, 4, {}, random_vector(4, 12), random_vector(4, 13));
  return all;
}

// Label smoothing or none, rows whose target is ignore_index, a target out
// of range (a NaN row loss); rows of zero classes.
Cases cross_entropy() {
  Cases all;
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& x,
                 const std::vector<int32_t>& targets, int32_t ignore, float eps, float log_atol) {
    KernelCase kc(named(name, "eps", eps, "ignore", ignore), split_sized(rows * cols));
    const Arg<float> px = kc.input(x);
    const Arg<int32_t> pt = kc.input(targets);
    const Arg<float> loss = kc.output(std::vector<float>(rows, 42.0f), within(1e-5f, log_atol));
    const Arg<float> counted = kc.output(std::vector<float>(rows, 42.0f), kExact);
    const Arg<float> log_probs =
        kc.result(rows * cols, within(1e-5f, log_atol));
    kc.call = [=](const Table& t, const Placed& p) {
      t.cross_entropy(p[px], p[pt], rows, cols, ignore, eps, p[loss], p[counted], p[log_probs]);
    };
    all.push_back(kc);
  };
  for (auto [rows, cols] : row_shapes(kSizeList)) {
    for (const Logits& x : logits(rows, cols))
      add(named("rows", rows, "cols", cols, x.name), rows, cols, x.x, targets_for(rows, cols), 1, 0.1f, x.log_atol);
    std::vector<int32_t> targets = int_vector(rows, 132, 0, static_cast<int>(cols) - 1);
    if (rows > 1) targets[1] = static_cast<int32_t>(cols);
    for (float eps : {0.0f, 0.1f})
      add(named("rows", rows, "cols", cols, "out of range"), rows, cols, random_vector(rows * cols, 131, -8, 8),
          targets, 0, eps, 1e-5f);
  }
  add("zero rows", 0, 5, {}, {}, -100, 0.1f, 0);
  // Zero classes: an ignored row counts 0, another has no target (NaN).
  KernelCase kc("rows of zero classes");
  const Arg<float> none = kc.input(std::vector<float>{});
  const Arg<int32_t> targets = kc.input(std::vector<int32_t>{-100, 0});
  const Arg<float> loss = kc.output(std::vector<float>(2, 42.0f), kExact, std::vector<float>{0.0f, NAN});
  const Arg<float> counted = kc.output(std::vector<float>(2, 42.0f), kExact, std::vector<float>{0.0f, 1.0f});
  const Arg<float> log_probs = kc.untouched(poison());
  kc.call = [=](const Table& t, const Placed& p) {
    t.cross_entropy(p[none], p[targets], 2, 0, -100, 0.1f, p[loss], p[counted], p[log_probs]);
  };
  all.push_back(kc);
  return all;
}

Cases cross_entropy_backward() {
  Cases all;
  auto add = [&](int64_t rows, int64_t cols, const std::vector<float>& x, const std::vector<int32_t>& targets,
                 int32_t ignore, float eps) {
    std::vector<float> loss(rows), counted(rows), log_probs(rows * cols);
    scalar_table().cross_entropy(x.data(), targets.data(), rows, cols, ignore, eps, loss.data(), counted.data(),
                                 log_probs.data());
    KernelCase kc(named("rows", rows, "cols", cols, "eps", eps, "ignore", ignore), split_sized(rows * cols));
    const Arg<float> lp = kc.input(log_probs), scale = kc.input(std::vector<float>{0.25f});
    const Arg<int32_t> pt = kc.input(targets);
    const Arg<float> d =
        kc.result(rows * cols, within(1e-5f, 1e-7f));
    kc.call = [=](const Table& t, const Placed& p) {
      t.cross_entropy_backward(p[lp], p[pt], rows, cols, ignore, eps, p[scale], p[d]);
    };
    all.push_back(kc);
  };
  for (auto [rows, cols] : row_shapes(kSizeList)) {
    for (const Logits& x : logits(rows, cols)) add(rows, cols, x.x, targets_for(rows, cols), 1, 0.1f);
    add(rows, cols, random_vector(rows * cols, 131, -8, 8), int_vector(rows, 132, 0, static_cast<int>(cols) - 1), 0,
        0.0f);
  }
  add(0, 5, {}, {}, -100, 0.1f);
  return all;
}

// A slice [.., 0:2, :] of rows of 3 blocks of d floats, against the copy
// worked out here (the fast table runs the reference's memcpy in parallel
// pieces); rows of 5 ints out of rows of 17, into rows of 9 (a slice then a
// concat); wide rows; none.
Cases copy_rows() {
  Cases all;
  auto add = [&](const std::string& name, const std::vector<float>& src, int64_t src_offset, int64_t src_stride,
                 const std::vector<float>& dst, int64_t dst_offset, int64_t dst_stride, int64_t rows, int64_t row_bytes,
                 const std::vector<float>& want) {
    KernelCase kc(name, split_sized(rows * row_bytes / 4));
    const Arg<float> ps = kc.input(src);
    const Arg<float> pd = want.empty() ? kc.output(dst, kExact) : kc.output(dst, kExact, want);
    kc.call = [=](const Table& t, const Placed& p) {
      t.copy_rows(p[ps] + src_offset, src_stride, p[pd] + dst_offset, dst_stride, rows, row_bytes);
    };
    all.push_back(kc);
  };
  for (int64_t a : {1, 7, 17})
    for (int64_t d : {1, 63, 65}) {
      const int64_t size = 2 * a * 3 * d;
      const std::vector<float> x = random_vector(size, 14);
      std::vector<float> want(size, 0.0f);
      for (int64_t r = 0; r < 2 * a; ++r)
        for (int64_t c = 0; c < 2 * d; ++c) want[r * 3 * d + c] = x[r * 3 * d + c];
      add(named("slice a", a, "d", d), x, 0, d * 4 * 3, std::vector<float>(size, 0.0f), 0, d * 4 * 3, 2 * a,
          d * 4 * 2, want);
    }
  for (int64_t rows : {1, 7, 65}) {
    // Small integers, as attention's masks: copy_rows moves bytes of any type.
    const std::vector<int32_t> src = int_vector(rows * 17, 111, -100, 100), dst = int_vector(rows * 9, 112, -5, 5);
    add(named("ints rows", rows), std::vector<float>(src.begin(), src.end()), 3, 17 * 4,
        std::vector<float>(dst.begin(), dst.end()), 2, 9 * 4, rows, 5 * 4, {});
  }
  const int64_t wide = kSplitCols + 7, row_bytes = kSplitCols * 4;
  add("split", random_vector(kSplitRows * wide, 14), 0, wide * 4, std::vector<float>(kSplitRows * kSplitCols), 0,
      row_bytes, kSplitRows, row_bytes, {});
  add("zero rows", {}, 0, 0, poison(), 0, 0, 0, 16, poison());
  add("rows of 0 bytes", {}, 0, 0, poison(), 0, 0, 3, 0, poison());
  return all;
}

// Permutations, against the elements picked here: y[i] = x at index j with
// j[perm[k]] = i[k], y read through x's strides permuted to y's dims; attention's
// head split; empty ones.
Cases copy_strided() {
  Cases all;
  auto add = [&](const Shape& shape, const std::vector<int>& perm, bool with_want) {
    Shape strides(shape.size()), y_shape, read;
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= shape[d];
    }
    for (int d : perm) {
      y_shape.push_back(shape[d]);
      read.push_back(strides[d]);
    }
    const std::vector<float> x = random_vector(numel(shape), 14);
    std::vector<float> want;
    if (with_want) {
      // Walk y's indices in order; x's index is their dot product with `read`.
      std::vector<int64_t> i(y_shape.size(), 0);
      for (int64_t e = 0; e < numel(y_shape); ++e) {
        int64_t at = 0;
        for (size_t k = 0; k < i.size(); ++k) at += i[k] * read[k];
        want.push_back(x[at]);
        for (size_t k = i.size(); k-- > 0 && ++i[k] == y_shape[k];) i[k] = 0;
      }
    }
    KernelCase kc(named("elements", numel(shape), "perm", perm[0], perm.back()), split_sized(numel(shape)));
    const Arg<float> px = kc.input(x);
    const std::vector<float> before(x.size(), 42.0f);
    const Arg<float> y = x.empty() ? kc.untouched(poison()) : with_want ? kc.output(before, kExact, want)
                                                                       : kc.output(before, kExact);
    const Rows rows = rows_view(y_shape, {read});
    kc.call = [=](const Table& t, const Placed& p) { t.copy_strided(p[px], p[y], rows); };
    all.push_back(kc);
  };
  for (int64_t a : {1, 7, 17})
    for (int64_t d : {1, 63, 65})
      for (const std::vector<int>& perm : {std::vector<int>{0, 2, 1, 3}, std::vector<int>{3, 1, 0, 2}})
        add({2, a, 3, d}, perm, true);
  add({7, 17}, {1, 0}, true);
  add({65, 129}, {1, 0}, true);
  add({2, 3, 4}, {0, 2, 1}, true);
  add({2, 3, 4, 5}, {3, 2, 1, 0}, true);
  add({1, 7, 1, 5}, {2, 3, 0, 1}, true);
  add({2, 100, 3, kSplitCols}, {0, 2, 1, 3}, false);
  add({3, 0, 2}, {2, 0, 1}, false);
  add({0, 5}, {1, 0}, false);
  return all;
}

Cases gather_rows() {
  Cases all;
  for (const Embedding& e : embeddings()) {
    KernelCase kc(named("vocab", e.vocab, "n", e.n, "dim", e.dim), split_sized(e.n * e.dim));
    const Arg<float> table = kc.input(random_vector(e.vocab * e.dim, 121));
    const Arg<int32_t> ids = kc.input(e.ids);
    const Arg<float> out = kc.output(std::vector<float>(e.n * e.dim), kExact);
    kc.call = [=](const Table& t, const Placed& p) { t.gather_rows(p[table], p[ids], e.n, e.dim, p[out]); };
    all.push_back(kc);
  }
  KernelCase empty("no ids");
  const Arg<float> table = empty.input(std::vector<float>{}), out = empty.untouched(poison());
  const Arg<int32_t> ids = empty.input(std::vector<int32_t>{});
  empty.call = [=](const Table& t, const Placed& p) { t.gather_rows(p[table], p[ids], 0, 4, p[out]); };
  all.push_back(empty);
  return all;
}

// Adds into its output, a repeated id once per occurrence, bit for bit on
// every backend (the sums' order is the ids').
Cases scatter_add_rows() {
  Cases all;
  for (const Embedding& e : embeddings()) {
    KernelCase kc(named("vocab", e.vocab, "n", e.n, "dim", e.dim));
    const Arg<float> grad_out = kc.input(random_vector(e.n * e.dim, 123));
    const Arg<int32_t> ids = kc.input(e.ids);
    const Arg<float> grad_table = kc.output(random_vector(e.vocab * e.dim, 124), kExact);
    kc.call = [=](const Table& t, const Placed& p) {
      t.scatter_add_rows(p[grad_out], p[ids], e.n, e.dim, p[grad_table]);
    };
    all.push_back(kc);
  }
  KernelCase empty("no ids");
  const Arg<float> grad_out = empty.input(std::vector<float>{}), grad_table = empty.untouched(poison());
  const Arg<int32_t> ids = empty.input(std::vector<int32_t>{});
  empty.call = [=](const Table& t, const Placed& p) { t.scatter_add_rows(p[grad_out], p[ids], 0, 4, p[grad_table]); };
  all.push_back(empty);
  return all;
}

namespace {

// Every bf16 value, by its bits.
std::vector<bf16> every_bf16() {
  std::vector<bf16> every(1 << 16);
  for (size_t i = 0; i < every.size(); ++i) every[i].bits = static_cast<uint16_t>(i);
  return every;
}

KernelCase rounding_case(const std::string& name, const std::vector<float>& x, const std::vector<bf16>& want) {
  const int64_t n = static_cast<int64_t>(x.size());
  KernelCase kc(name, n == kSplitElements);
  const Arg<float> px = kc.input(x);
  const std::vector<bf16> before(n ? n : 8, bf16{0x4242});
  const Arg<bf16> y = n == 0 ? kc.untouched(before) : want.empty() ? kc.output(before, kExact)
                                                                   : kc.output(before, kExact, want);
  kc.call = [=](const Table& t, const Placed& p) { t.float_to_bf16(p[px], p[y], n); };
  return kc;
}

}  // namespace

// Ties to even, NaN stays NaN: every bf16 value widened comes back as it was
// (a NaN quieted); random floats with the edge values and exact ties (low 16
// bits 0x8000); roundings worked out by hand: 1 + 2^-8 lies halfway between 1
// and 1 + 2^-7 and goes to the even mantissa (1); 1 + 3 * 2^-8 up to the even
// 1 + 2^-6; just above a tie rounds up; the largest float rounds to infinity;
// a NaN whose payload is all in the dropped bits stays a NaN.
Cases float_to_bf16() {
  Cases all;
  std::vector<float> wide;
  std::vector<bf16> back;
  for (bf16 v : every_bf16()) {
    wide.push_back(to_float(v));
    back.push_back(bf16{static_cast<uint16_t>(std::isnan(wide.back()) ? v.bits | 0x40 : v.bits)});
  }
  all.push_back(rounding_case("every bf16 value, widened", wide, back));
  for (int64_t n : {int64_t{1031}, int64_t{4099}, kSplitElements}) {
    std::vector<float> x = with_edges(n, 11, -1e3f, 1e3f);
    for (int64_t i = 2; i < n; i += 7)
      x[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(x[i]) & 0xFFFF0000u) | 0x8000u);
    all.push_back(rounding_case(named("ties n", n), x, {}));
  }
  all.push_back(rounding_case("by hand",
                              {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, FLT_MAX, -0.0f,
                               std::bit_cast<float>(0x7F800001u), 0x1p-140f},
                              {{0x3F80}, {0x3F82}, {0x3F81}, {0x7F80}, {0x8000}, {0x7FC0}, {0x0000}}));
  all.push_back(rounding_case("empty", {}, {}));
  return all;
}

// Exact: every bf16 value, then the split-sized rounded floats.
Cases bf16_to_float() {
  Cases all;
  auto add = [&](const std::string& name, const std::vector<bf16>& x) {
    const int64_t n = static_cast<int64_t>(x.size());
    KernelCase kc(name, n >= kSplitElements);
    const Arg<bf16> px = kc.input(x);
    const Arg<float> y = kc.result(n, kExact);
    kc.call = [=](const Table& t, const Placed& p) { t.bf16_to_float(p[px], p[y], n); };
    all.push_back(kc);
  };
  add("every bf16 value", every_bf16());
  add("split", to_bf16s(with_edges(kSplitElements, 11, -1e3f, 1e3f)));
  add("empty", {});
  return all;
}

// Adam and AdamW, on random gradients and with the edge values, unclipped
// and clipped (g_scale below 1). Within the tolerances of the reference: the
// vectors multiply by 1 / sqrt_bc2 where the reference divides. Bit for bit
// the same at every thread count, as every entry: the chunks are whole
// vectors, so only the array's last elements take the reference's loop.
Cases adam_step() {
  struct Decay {
    float l2, decay, g_scale;
  };
  Cases all;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1025}, int64_t{70001}, kSplitElements})
    for (bool edges : {false, true})
      for (Decay d : {Decay{0.0f, 0.0f, 1.0f}, {0.01f, 0.001f, 1.0f}, {0.0f, 1e-3f, 1.0f}, {0.01f, 0.0f, 1.0f},
                      {0.0f, 0.0f, 0.37f}, {0.01f, 0.001f, 0.37f}}) {
        const float l2 = d.l2, decay = d.decay, g_scale = d.g_scale;
        KernelCase kc(named("n", n, "edges", edges, "l2", l2, "decay", decay, "g_scale", g_scale),
                      n == kSplitElements);
        const Arg<float> g = kc.input(edges ? with_edges(n, 18) : random_vector(n, 18));
        const Arg<float> p = n ? kc.output(random_vector(n, 17), within(1e-5f, 1e-6f)) : kc.untouched(poison());
        // m can cancel to near 0.
        const Arg<float> m = n ? kc.output(random_vector(n, 93), within(1e-5f, 1e-7f)) : kc.untouched(poison());
        const Arg<float> v = n ? kc.output(random_vector(n, 94, 0, 1), within(1e-5f, 1e-7f)) : kc.untouched(poison());
        kc.call = [=](const Table& t, const Placed& at) {
          t.adam_step(at[p], at[g], g_scale, at[m], at[v], n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, l2, decay);
        };
        all.push_back(kc);
      }
  return all;
}

// Without momentum, its first step, later steps, Nesterov's, and Nesterov's
// clipped (g_scale below 1); Nesterov's also against torch.optim.SGD's
// update written out here (the fast table runs the reference's loop in
// parallel pieces). The compiler may fuse a multiply and an add here or
// there: 1 ulp.
Cases sgd_step() {
  Cases all;
  const float lr = 0.1f, momentum = 0.9f, l2 = 0.01f;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{129}, int64_t{70001}, kSplitElements})
    for (int variant = 0; variant < 5; ++variant) {
      const bool with_momentum = variant > 0, nesterov = variant >= 3, first = variant == 1;
      const float g_scale = variant == 4 ? 0.37f : 1.0f;
      const std::vector<float> p0 = random_vector(n, 16), g = with_edges(n, 18), buf0(n, 0.3f);
      std::vector<float> want_p(n), want_buf(n);
      for (int64_t i = 0; i < n; ++i) {
        const float grad = g[i] * g_scale + l2 * p0[i];
        want_buf[i] = momentum * 0.3f + grad;
        want_p[i] = p0[i] - lr * (grad + momentum * want_buf[i]);
      }
      KernelCase kc(named("n", n, "variant", variant), n == kSplitElements);
      const Arg<float> pg = kc.input(g);
      const Tolerance ulp = within(1e-6f, 1e-7f);
      const Arg<float> p = !n ? kc.untouched(poison()) : nesterov ? kc.output(p0, ulp, want_p) : kc.output(p0, ulp);
      const Arg<float> buf = !n ? kc.untouched(poison()) : nesterov ? kc.output(buf0, ulp, want_buf) : kc.output(buf0, ulp);
      kc.call = [=](const Table& t, const Placed& at) {
        t.sgd_step(at[p], at[pg], g_scale, with_momentum ? at[buf] : Mem<float>(), n, lr, momentum, l2, nesterov,
                   first);
      };
      all.push_back(kc);
    }
  return all;
}

}  // namespace cases

std::vector<EntryCases> every_entry_cases() {
  static constexpr KernelCases table{
#define SF_BIND_CASES(entry) .entry = cases::entry,
      SF_KERNEL_LIST(SF_BIND_CASES)
#undef SF_BIND_CASES
  };
  return {
#define SF_ENTRY_CASES(entry) {#entry, &table.entry},
      SF_KERNEL_LIST(SF_ENTRY_CASES)
#undef SF_ENTRY_CASES
  };
}

}  // namespace sf::testing
