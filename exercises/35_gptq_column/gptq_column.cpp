// Exercise 35_gptq_column (lesson 15): one GPTQ column update.
//
// Read first: lesson 15's README (lessons/15-compression/README.md), the part on GPTQ. The
// library's version is gpt/compress.h (gptq_quantize).
//
// Rounding every weight to its nearest level (round-to-nearest, RTN) minimises each weight's
// error on its own. What matters is the layer's output X W^T, and the inputs' channels are
// correlated: an error in column j can be partly cancelled by nudging the columns that have
// not been rounded yet. The optimal nudge (Optimal Brain Surgeon) is the error times a row of
// the inverse Hessian; GPTQ takes the columns in a fixed order and reads those rows from the
// Cholesky factor U of H^-1, so each column costs one outer product.
//
// Check your work: `nnlab check` (or `nnlab check --only 35_gptq_column`).
#include "exercises/35_gptq_column/gptq_column.h"

namespace ex {

void gptq_column(float* W, int rows, int cols, int j, const float* U, const float* scales, int qmax) {
  // TODO: for each row r: q = the nearest level of W[r][j] (scales[r] * integer in
  //       [-qmax, qmax]); err = (W[r][j] - q) / U[j][j]; subtract err * U[j][k] from W[r][k]
  //       for k > j; store q in W[r][j].
  (void)W;
  (void)rows;
  (void)cols;
  (void)j;
  (void)U;
  (void)scales;
  (void)qmax;
}

}  // namespace ex
