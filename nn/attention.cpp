// nn/attention.cpp: causal multi-head self-attention, forward and backward (nn/attention.h).
//
// The plain loops a student steps through are the v1 rung of kernels/attention.cpp (the
// one copy the naive GPT backend runs and the fast rung is validated against); these check
// the sizes (nn::Error with a hint) and call it.
#include "nn/attention.h"

#include "kernels/attention.h"
#include "nn/check.h"

namespace nn {

void check_attention_sizes(int B, int Tn, int C, int NH) {
  NN_CHECK(B >= 1 && Tn >= 1 && C >= 1 && NH >= 1,
           "attention: expected positive sizes, got B=" << B << " T=" << Tn << " C=" << C
                                                        << " NH=" << NH
                                                        << ": check the model config");
  NN_CHECK(C % NH == 0, "attention: C=" << C << " is not divisible by NH=" << NH
                                        << ": pick n_head so that C / n_head is a whole head size");
}

template <typename F>
void attention_forward(F* out, F* preatt, F* att, const F* qkv, int B, int Tn, int C, int NH) {
  check_attention_sizes(B, Tn, C, NH);
  kernels::attention_forward_v1(out, preatt, att, qkv, B, Tn, C, NH);
}

template <typename F>
void attention_backward(F* dqkv, F* dpreatt, F* datt, const F* dout, const F* qkv, const F* att,
                        int B, int Tn, int C, int NH) {
  check_attention_sizes(B, Tn, C, NH);
  kernels::attention_backward_v1(dqkv, dpreatt, datt, dout, qkv, att, B, Tn, C, NH);
}

// ---- explicit instantiations: float (training), double (gradient checks) ---------------
template void attention_forward<float>(float*, float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, double*, const double*, int, int, int,
                                        int);
template void attention_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, int, int, int, int);
template void attention_backward<double>(double*, double*, double*, const double*, const double*,
                                         const double*, int, int, int, int);

}  // namespace nn
