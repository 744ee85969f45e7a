// Launching a kernel: its arguments set from a parameter pack and its work
// sizes taken from a few fixed shapes.
//
// PoCL compiles a kernel anew for every local size it meets (and its CPU device
// has no non-uniform work-groups), so launches use a handful of fixed local
// sizes and pad the global size up to a multiple of them; kernels check bounds.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../kernels/kernels.h"
#include "runtime.h"

namespace sf::opencl_backend {

using kernels::Mem;

struct Grid {
  cl_uint dims;
  size_t global[3];
  size_t local[3];
};

constexpr size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// The shapes of work the kernels use (kernels/common.cl says why: PoCL's CPU
// device vectorises only across the items of a work-group, so the kernels
// carry their own float16 vectors). Elementwise kernels take the same shapes
// on every device; row and column kernels take the runtime's Shapes.

// n work items in groups of 64: many light items, e.g. one per element.
inline Grid items(int64_t n) {
  constexpr size_t group = 64;
  return {1, {round_up(static_cast<size_t>(n), group), 1, 1}, {group, 1, 1}};
}

// Floats in the elementwise kernels' vectors (float16: one AVX-512 register).
constexpr int kVector = 16;

// The pieces of `width` consecutive columns that cover rows of cols elements
// (a row's last piece may be shorter): one work item each
// (kernels/common.cl: row_piece). By default the width of the kernels that go
// along rows in pieces (the broadcasting ops, bias_relu, gather_rows), which
// they see as PIECE (Shapes::piece): with CPU shapes 16 vectors, which
// amortise an item's division and broadcast offsets (measured on PoCL: 64
// columns were slower, 1024 no faster); with GPU shapes one vector, so that a
// [2048, 1024] tensor is 131072 items rather than 8192, two warps per compute
// unit of an H200, too few to hide memory's latency.
inline int64_t pieces(int64_t rows, int64_t cols, int64_t width = Runtime::get().shapes().piece) {
  return rows * ((cols + width - 1) / width);
}

// Elements in vectors of 16: one item per 16 consecutive elements of n, in
// groups of 64.
inline Grid vectors(int64_t n) { return items(pieces(1, n, kVector)); }

// A row kernel over `rows` rows: one work-group of Shapes::row_items items per
// row. With CPU shapes a group of one item, a plain loop on PoCL; the groups
// spread over the cores however few there are (64 rows in one group would run
// on one core).
inline Grid row_groups(int64_t rows) {
  size_t group = static_cast<size_t>(Runtime::get().shapes().row_items);
  return {1, {static_cast<size_t>(rows) * group, 1, 1}, {group, 1, 1}};
}

// A column kernel over rows of cols elements: one item per Shapes::lanes
// columns of each row (pieces of that width), in groups of
// Shapes::column_items; and that `blocks` times, the launch's second dim
// (the blocks a column sum cuts its columns into, table.cpp).
inline Grid column_items(int64_t rows, int64_t cols, int64_t blocks = 1) {
  const Shapes& shapes = Runtime::get().shapes();
  size_t group = static_cast<size_t>(shapes.column_items);
  return {2,
          {round_up(static_cast<size_t>(pieces(rows, cols, shapes.lanes)), group), static_cast<size_t>(blocks), 1},
          {group, 1, 1}};
}

// A size or stride as the int32 the kernels index with; fails beyond it.
int32_t int32(int64_t value);

namespace detail {

void set_arg(cl_kernel kernel, cl_uint index, size_t size, const void* value);

// An array is two kernel arguments: its buffer and its offset in elements (an
// OpenCL 1.2 host cannot point into the middle of a buffer). A null Mem passes
// a null buffer; kernels are told separately whether an optional array is there.
template <class T>
void add_arg(cl_kernel kernel, cl_uint& index, Mem<T> array) {
  static_assert(sizeof(std::remove_cv_t<T>) == 4 || sizeof(std::remove_cv_t<T>) == 2, "float, int or bf16");
  cl_mem buffer = static_cast<cl_mem>(array.buffer);
  cl_long offset = static_cast<cl_long>(array.offset / sizeof(T));
  set_arg(kernel, index++, sizeof buffer, &buffer);
  set_arg(kernel, index++, sizeof offset, &offset);
}

// A scalar argument, passed as is: its C++ type must match the kernel's
// (int64_t for long, int32_t or an op enum of shared.h for int, uint32_t for
// uint).
template <class T>
void add_arg(cl_kernel kernel, cl_uint& index, const T& value) {
  static_assert(!std::is_same_v<T, bool>, "pass flags as int32_t");
  static_assert(std::is_trivially_copyable_v<T> && (!std::is_enum_v<T> || sizeof(T) == 4));
  set_arg(kernel, index++, sizeof value, &value);
}

// A Rows view (kernels.h) is one argument, shared.h's PackedRows by value.
// Fails unless its elements fit int32 (and so every offset and stride).
void add_arg(cl_kernel kernel, cl_uint& index, const kernels::Rows& rows);

void enqueue(cl_kernel kernel, const Grid& grid);

}  // namespace detail

// Sets the kernel's arguments in order and queues it over `grid` (nothing
// happens for an empty grid).
template <class... Args>
void launch(cl_kernel kernel, const Grid& grid, const Args&... args) {
  if (grid.global[0] * grid.global[1] * grid.global[2] == 0) return;
  cl_uint index = 0;
  (detail::add_arg(kernel, index, args), ...);
  detail::enqueue(kernel, grid);
}

}  // namespace sf::opencl_backend
