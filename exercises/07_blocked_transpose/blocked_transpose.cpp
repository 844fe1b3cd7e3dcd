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
// Blocking changes the ORDER in which the elements are visited, not what is written: cut
// the matrix into square tiles of tile x tile elements and finish one tile before starting
// the next. Inside one tile the stretch of a row read from `in` and the stretch of a column
// written to `out` are both only `tile` floats long, so the cache lines the tile touches
// are still in the cache when the next row of the tile needs them (blocked_transpose.h).
// in (5, 7) with tile = 3: the tiles, visited in the order of their numbers,
//
//     0 0 0 1 1 1 2
//     0 0 0 1 1 1 2
//     0 0 0 1 1 1 2
//     3 3 3 4 4 4 5
//     3 3 3 4 4 4 5
//
// The tiles on the right and bottom edges are smaller when tile does not divide the shape
// (here 3 x 1, 2 x 3 and 2 x 1; 37 rows in tiles of 8 leave a last tile of 5 rows).
//
// Check your work: `nnlab check` (or `nnlab check --only 07_blocked_transpose`).
#include "exercises/07_blocked_transpose/blocked_transpose.h"

#include <stdexcept>

namespace ex {

void transpose_blocked(float* out, const float* in, int rows, int cols, int tile) {
  // TODO: 1. a tile size that cannot cut the matrix into tiles is refused before anything
  //          is written (what blocked_transpose.h promises for it).
  //       2. the transpose of the plain loop, visited tile by tile as in the picture: which
  //          tiles are there, which elements belong to one, and where does a tile at the
  //          right or bottom edge end?
  (void)out;
  (void)in;
  (void)rows;
  (void)cols;
  (void)tile;
}

}  // namespace ex
