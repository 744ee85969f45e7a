// rows_view: the one place an op's shape and strides become the Rows view
// every backend takes (kernels.h).
#include <array>

#include "base/error.h"
#include "kernels.h"

namespace sf::kernels {

Rows rows_view(const std::vector<int64_t>& shape, std::initializer_list<std::vector<int64_t>> strides,
               bool whole_rows) {
  // Merge outer to inner: dim d joins the previous one where every operand's
  // previous stride is its stride along d times d's size (it walks both as one).
  std::vector<int64_t> dims;
  std::vector<std::array<int64_t, 2>> steps;
  size_t last = shape.size() - 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool row_dim = whole_rows && d == last;
    if (shape[d] == 1 && !row_dim) continue;
    std::array<int64_t, 2> step{};
    int k = 0;
    for (const std::vector<int64_t>& s : strides) step[k++] = s[d];
    bool merges = !dims.empty() && !row_dim;
    for (int i = 0; i < 2; ++i) merges = merges && steps.back()[i] == step[i] * shape[d];
    if (merges) {
      dims.back() *= shape[d];
      steps.back() = step;
    } else {
      dims.push_back(shape[d]);
      steps.push_back(step);
    }
  }
  Rows rows;
  if (dims.empty()) return rows;  // one element: one row of one column
  rows.cols = dims.back();
  rows.col_strides[0] = steps.back()[0];
  rows.col_strides[1] = steps.back()[1];
  rows.ndim = static_cast<int>(dims.size()) - 1;
  if (rows.ndim > Rows::kMaxDims)
    internal_fail("an op walks ", rows.ndim, " outer dims after merging; kernels take at most ", Rows::kMaxDims);
  for (int d = 0; d < rows.ndim; ++d) {
    rows.count *= dims[d];
    rows.shape[d] = dims[d];
    rows.strides[0][d] = steps[d][0];
    rows.strides[1][d] = steps[d][1];
  }
  return rows;
}

}  // namespace sf::kernels
