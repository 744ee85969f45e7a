// The helpers of the OpenCL C kernels of every table entry but GEMM, which
// follow it in one program (autograd/opencl/sources.cpp): elementwise.cl,
// reductions.cl, rows.cl, indexing.cl, optimizer.cl. Each kernel computes what
// the entry of the same name in kernels/scalar.cpp computes (the formulas are
// the comments in kernels/kernels.h). Sums down a column (sum_to, the layer
// norm parameter gradients) add in the CPU's order in CPU shapes and by blocks
// of rows in GPU shapes; sums along a row run as partial sums (per vector
// lane, per work item), so they match within rounding.
//
// Conventions: every array arrives as (pointer to the buffer's start, offset in
// elements) and is advanced by its offset first; sizes are long (ints where an
// index is decomposed, which is cheaper and enough: sizes fit in int32).
// Launches may pad the number of work items up to a multiple of the work-group
// size, so each kernel first checks that its item is in range.
//
// Why explicit float16 vectors: the CPU device these kernels are tuned on
// (PoCL) vectorises a kernel only across the work items of a group, and gives
// up on kernels with a switch, integer division per element, private arrays or
// loops of variable trip count: such kernels ran one scalar element at a time.
// So each kernel does its own vectorising, with float16 (one AVX-512 register)
// and vload16 / vstore16. Elementwise kernels: each item handles 16
// consecutive elements (launch.h: vectors) or a few vectors along a row
// (launch.h: pieces), in work-groups of 64 items, on every device.
//
// Row and column kernels take the device's shapes (runtime.h: Shapes), which
// the runtime passes as LANES, ROW_ITEMS and COLUMN_ITEMS:
//   - CPU shapes: a row kernel is one item per row, looping over it 16 columns
//     at a time (LANES 16), each item its own work-group (ROW_ITEMS 1), which
//     PoCL runs as a plain SIMD loop; a column sum is one item per 16 columns
//     looping down the rows, also in work-groups of one (COLUMN_ITEMS 1), so
//     that the few items spread over the cores;
//   - GPU shapes: a row kernel is one work-group of ROW_ITEMS items per row,
//     item k reading columns k, k + ROW_ITEMS, ... (LANES 1), so neighbouring
//     items read neighbouring floats, and a row's max or sum is a tree over
//     the items in local memory; a column sum is one item per column and
//     block of rows (the launch's second dim), in groups of COLUMN_ITEMS
//     neighbouring columns, and then one per column adding the blocks' sums
//     (autograd/opencl/table.cpp: column_blocks); the embedding's backward,
//     one item per column and bucket of ids.

// ---- vectors of 16 -----------------------------------------------------------

// 0, 1, ..., 15: each lane's index within its vector.
int16 lane_indices(void) { return (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }

float hsum16(float16 v) {
  float8 a = v.lo + v.hi;
  float4 b = a.lo + a.hi;
  float2 c = b.lo + b.hi;
  return c.x + c.y;
}

float hmax16(float16 v) {
  float8 a = fmax(v.lo, v.hi);
  float4 b = fmax(a.lo, a.hi);
  float2 c = fmax(b.lo, b.hi);
  return fmax(c.x, c.y);
}

// Lanes k of a vector are elements c + k of a row of n elements, element j at
// p[j * stride] (stride 1: contiguous, 0: one value broadcast). load16 reads
// `pad` into the lanes past the row's end; store16 writes only those before it.
// The whole contiguous vector is one vload16 / vstore16; the row's last,
// partial vector and strided rows go one lane at a time.
#define VECTOR_ACCESS(T, T16, suffix)                                                      \
  T16 load16##suffix(__global const T* p, int stride, int c, int n, T pad) {               \
    if (c + 16 <= n) {                                                                     \
      if (stride == 1) return vload16(0, p + c);                                           \
      if (stride == 0) return (T16)(p[0]);                                                 \
    }                                                                                      \
    T lanes[16];                                                                           \
    for (int k = 0; k < 16; ++k) lanes[k] = c + k < n ? p[(c + k) * stride] : pad;        \
    return vload16(0, lanes);                                                              \
  }                                                                                        \
  void store16##suffix(T16 v, __global T* p, int stride, int c, int n) {                   \
    if (stride == 1 && c + 16 <= n) {                                                      \
      vstore16(v, 0, p + c);                                                               \
      return;                                                                              \
    }                                                                                      \
    T lanes[16];                                                                           \
    vstore16(v, 0, lanes);                                                                 \
    for (int k = 0; k < 16 && c + k < n; ++k) p[(c + k) * stride] = lanes[k];              \
  }
VECTOR_ACCESS(float, float16, )
VECTOR_ACCESS(int, int16, _int)

// ---- the shapes' vectors -------------------------------------------------------
// Row and column kernels hold LANES floats per item as floatV, with loadV,
// storeV (as load16, store16), hsumV, hmaxV and laneV (each lane's index).

#if LANES == 16
#define floatV float16
#define loadV load16
#define loadV_int load16_int
#define storeV store16
#define hsumV hsum16
#define hmaxV hmax16
#define laneV() lane_indices()
#elif LANES == 1
#define SCALAR_ACCESS(T, suffix)                                                           \
  T load1##suffix(__global const T* p, int stride, int c, int n, T pad) {                  \
    return c < n ? p[c * stride] : pad;                                                    \
  }
SCALAR_ACCESS(float, )
SCALAR_ACCESS(int, _int)
void store1(float v, __global float* p, int stride, int c, int n) {
  if (c < n) p[c * stride] = v;
}
#define floatV float
#define loadV load1
#define loadV_int load1_int
#define storeV store1
#define hsumV(v) (v)
#define hmaxV(v) (v)
#define laneV() 0
#else
#error "LANES must be 16 (CPU shapes) or 1 (GPU shapes)"
#endif

// ---- a row per work-group ------------------------------------------------------
// A row kernel runs one work-group of ROW_ITEMS items per row (row_group()),
// its items taking LANES columns each, side by side: item k starts at column
// row_start() = k LANES and steps ROW_STEP columns. Each item reduces its part
// of the row to one float; group_sum and group_max combine the parts of the
// group's items into the row's value, which every item gets. They take the
// kernel's ROW_SCRATCH and must be reached by every item of the group.

#define ROW_GROUP __attribute__((reqd_work_group_size(ROW_ITEMS, 1, 1)))
#define ROW_SCRATCH __local float scratch[ROW_ITEMS]
#define ROW_STEP (ROW_ITEMS * LANES)

int row_start(void) { return ROW_ITEMS == 1 ? 0 : (int)get_local_id(0) * LANES; }

#if ROW_ITEMS == 1
#define group_sum(part, scratch) (part)
#define group_max(part, scratch) (part)
#else
// A tree in local memory: in step s the first ROW_ITEMS / 2^s items each
// combine two values, log2(ROW_ITEMS) steps in all (ROW_ITEMS a power of 2).
// The last barrier lets the next reduction reuse the scratch.
#define GROUP_REDUCE(name, combine)                                                        \
  float name(float part, __local float* scratch) {                                         \
    int item = get_local_id(0);                                                            \
    scratch[item] = part;                                                                  \
    barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    for (int width = ROW_ITEMS / 2; width > 0; width /= 2) {                               \
      if (item < width) scratch[item] = combine(scratch[item], scratch[item + width]);     \
      barrier(CLK_LOCAL_MEM_FENCE);                                                        \
    }                                                                                      \
    float total = scratch[0];                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    return total;                                                                          \
  }
#define plus(a, b) ((a) + (b))
GROUP_REDUCE(group_sum, plus)
GROUP_REDUCE(group_max, fmax)
#endif

// A column kernel's items, one per LANES columns: COLUMN_ITEMS per group.
#define COLUMN_GROUP __attribute__((reqd_work_group_size(COLUMN_ITEMS, 1, 1)))

// ---- rows ------------------------------------------------------------------
// An op's index space as the ops prepared it (kernels.h: Rows), one kernel
// argument (shared.h: PackedRows): `count` rows of `cols` elements, the outer
// dims (ndim of them) with each operand's strides along them, and each
// operand's stride along a row.

// The offset of row r in operand k (kernels::Rows::offset): r decomposed over
// the outer dims.
int row_offset(PackedRows rows, int k, int r) {
  int offset = 0;
  for (int d = rows.ndim - 1; d >= 0; --d) {
    offset += r % rows.shape[d] * rows.strides[k][d];
    r /= rows.shape[d];
  }
  return offset;
}

// Row pieces: item g of a [rows, cols] launch (launch.h: pieces) covers
// `width` columns of one row, the row's pieces side by side; the row's last
// piece may be shorter. Sets the item's row and its columns [first, end);
// false for the items that pad the launch. Elementwise kernels go PIECE
// columns at a time (launch.h: pieces; runtime.h: Shapes::piece), in CPU
// shapes enough to amortise the item's divisions and row offsets; column
// sums take LANES.
bool row_piece(int rows, int cols, int width, int* row, int* first, int* end) {
  int pieces = (cols + width - 1) / width, g = get_global_id(0);
  *row = g / pieces;
  *first = (g - *row * pieces) * width;
  *end = min(*first + width, cols);
  return *row < rows;
}

// Vector items: item g handles elements [16 g, 16 g + 16) of n (launch.h:
// vectors). Sets its first element and how many of its 16 lanes are in range.
bool vector_item(long n, long* first, int* count) {
  *first = get_global_id(0) * 16L;
  *count = (int)min(n - *first, 16L);
  return *first < n;
}
