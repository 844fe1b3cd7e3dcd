// Reference solution of exercise 07_blocked_transpose (lesson 03). Try it yourself first:
// exercises/07_blocked_transpose/blocked_transpose.cpp.
#include "exercises/07_blocked_transpose/blocked_transpose.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace ex {

void transpose_blocked(float* out, const float* in, int rows, int cols, int tile) {
  // in (rows, cols) -> out (cols, rows), assigned
  if (tile < 1) {
    // A tile of 0 would never advance r0 (an endless loop); a negative one walks backwards.
    throw std::invalid_argument("transpose_blocked: tile must be >= 1, got " +
                                std::to_string(tile) + " (try 16: a 16 x 16 float block is " +
                                "16 cache lines of in and 16 of out)");
  }
  using std::ptrdiff_t;
  // The plain loop this replaces:  for r < rows: for c < cols: out[c][r] = in[r][c]
  for (int r0 = 0; r0 < rows; r0 += tile) {
    const int r1 = std::min(r0 + tile, rows);  // block rows [r0, r1): (tile,) or fewer at the edge
    for (int c0 = 0; c0 < cols; c0 += tile) {
      const int c1 = std::min(c0 + tile, cols);  // block columns [c0, c1): (tile,) or fewer
      // One (r1 - r0, c1 - c0) block: its lines of in and of out all stay in L1.
      for (int r = r0; r < r1; ++r) {
        const float* in_row = in + static_cast<ptrdiff_t>(r) * cols;  // (cols,) : row r of in
        for (int c = c0; c < c1; ++c) {
          out[static_cast<ptrdiff_t>(c) * rows + r] = in_row[c];  // out[c][r] = in[r][c]
        }
      }
    }
  }
}

}  // namespace ex
