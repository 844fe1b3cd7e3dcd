// Exercise 07_blocked_transpose (lesson 03): a transpose that reads AND writes along lines.
// You write the body in blocked_transpose.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// out (cols, rows) = in^T, where in is (rows, cols), both row-major:
//     out[c][r] = in[r][c]        out[c * rows + r] = in[r * cols + c]
// processed in tile x tile blocks. tile must be >= 1: tile <= 0 throws
// std::invalid_argument (a block with no elements would loop forever or do nothing, and
// silently doing nothing is the worse bug). rows or cols of 0: nothing to do.
//
// Why blocks. A plain transpose must stride through one of the two matrices: walk `in`
// along a row (unit stride) and `out` is written down a column (stride `rows` floats), or
// the other way round. Each strided access lands on its own 64-byte cache line and uses
// 4 bytes of it; when the matrix is large, that line is evicted before the next pass
// comes back for its other 15 floats, so every float written costs a whole line of
// traffic. In a tile x tile block (16 x 16 floats = 16 lines of `in` and 16 lines of
// `out`, 2 KiB in all) the lines a column walk touches are still in L1 when the next
// column needs them: both reads and writes use every float of every line they bring in.
// The edge blocks are smaller when tile does not divide rows or cols.
void transpose_blocked(float* out, const float* in, int rows, int cols, int tile);

}  // namespace ex
