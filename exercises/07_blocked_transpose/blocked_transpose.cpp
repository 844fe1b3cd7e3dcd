// Exercise 07_blocked_transpose (lesson 03): a transpose that reads AND writes along lines.
//
// Read first: lesson 03's README, the section on cache lines and blocking;
// blocked_transpose.h says why a plain transpose wastes most of every cache line.
//
// out (cols, rows) = in^T, in (rows, cols), row-major. The plain loop, the thing to block:
//
//     for (int r = 0; r < rows; ++r) {
//       for (int c = 0; c < cols; ++c) {
//         out[c * rows + r] = in[r * cols + c];   // in: unit stride; out: stride `rows`
//       }
//     }
//
// Blocked, the same two loops run over one tile x tile block at a time:
//
//     for r0 = 0, tile, 2*tile, ... < rows:          // which block row
//       for c0 = 0, tile, 2*tile, ... < cols:        // which block column
//         for r in [r0, min(r0 + tile, rows)):       // (tile,) rows of the block
//           for c in [c0, min(c0 + tile, cols)):     // (tile,) columns of the block
//             out[c * rows + r] = in[r * cols + c];
//
// The min() matters: 37 rows in tiles of 8 leave a last block of 5.
//
// Check your work: `nnlab check` (or `nnlab check --only 07_blocked_transpose`).
#include "exercises/07_blocked_transpose/blocked_transpose.h"

#include <stdexcept>

namespace ex {

void transpose_blocked(float* out, const float* in, int rows, int cols, int tile) {
  // TODO: 1. if tile < 1: throw std::invalid_argument("... tile must be >= 1 ...")
  //       2. the four loops above: two over the blocks, two inside one block.
  (void)out;
  (void)in;
  (void)rows;
  (void)cols;
  (void)tile;
}

}  // namespace ex
