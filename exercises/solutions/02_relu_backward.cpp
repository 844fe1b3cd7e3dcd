// Reference solution of exercise 02_relu_backward (lesson 02). Try it yourself first:
// exercises/02_relu_backward/relu_backward.cpp.
#include "exercises/02_relu_backward/relu_backward.h"

namespace ex {

void relu_backward(float* dinp, const float* dout, const float* inp, int64_t N) {
  // dout (N), inp (N) -> dinp (N), assigned
  for (int64_t i = 0; i < N; ++i) {
    // relu passes the gradient where it passed the value (inp > 0) and blocks it elsewhere;
    // at inp == 0 the slope is undefined and we pick 0, as nn::relu_backward does.
    dinp[i] = inp[i] > 0.0f ? dout[i] : 0.0f;
  }
}

}  // namespace ex
