// kernels/cuda/bench/registry.cpp: the list of CUDA ops, in lesson order, and the helpers
// their descriptions share (kernels/cuda/bench/ops.h).
#include <cstring>
#include <span>
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

const std::vector<Op>& ops() {
  static const std::vector<Op> all = {
      matmul_op(),        cos2_op(),     softmax_op(),         layernorm_forward_op(),
      layernorm_backward_op(), residual_layernorm_op(), gelu_op(), bias_gelu_op(),
      crossentropy_op(),  adamw_op(),    attention_op(),
      // the GPT's ops (gpt/backend_cuda.cpp)
      bias_backward_op(),
      encoder_forward_op(), encoder_backward_op(), gelu_backward_op(), dropout_forward_op(), multiply_op(),
      add_op(), scale_op(), crossentropy_loss_op(), crossentropy_backward_op(), sum_op(),
      attention_backward_op(),
      // the modern (Llama) block (issue 21)
      rmsnorm_forward_op(), rmsnorm_backward_op(), rope_forward_op(), rope_backward_op(), swiglu_forward_op(),
      swiglu_backward_op(),
      // inference (lesson 10)
      matvec_op(), attention_decode_op(),
      // integer inference (lesson 15)
      int8_gemm_op(),
  };
  return all;
}

const Op& op(const std::string& name) {
  std::string known;
  for (const Op& o : ops()) {
    if (o.name == name) return o;
    known += (known.empty() ? "" : ", ") + o.name;
  }
  throw std::invalid_argument("no CUDA op '" + name + "' (known: " + known + ")");
}

Array<float> random_buffer(Device& dev, size_t n, uint64_t seed, float lo, float hi, std::vector<float>* host_copy) {
  std::vector<float> host(n);
  harness::fill_random(host, seed, lo, hi);
  Array<float> b(dev, host, kernels::uninitialized);
  if (host_copy) *host_copy = std::move(host);
  return b;
}

harness::Check compare_device(const std::string& name, const Array<float>& got, const std::vector<double>& want,
                              harness::Tolerance tol) {
  const std::vector<float> host = got.to_vector();
  return harness::compare(name, host, want, tol);
}

harness::Check compare_window(const std::string& name, const Array<float>& out, size_t at, size_t n,
                              const std::vector<double>& want, harness::Tolerance tol) {
  const std::vector<float> host = out.to_vector();
  harness::Check c = harness::compare(name, std::span<const float>(host.data() + at, n), want, tol);
  const size_t outside = at == 0 ? n : 0;
  uint32_t bits = 0;
  std::memcpy(&bits, &host[outside], sizeof bits);
  if (bits != 0xFFFFFFFFu) {
    ++c.mismatches;
    c.report += name + ": the float " + (at == 0 ? "after the end" : "before the start") +
                " of the output was overwritten\n";
  }
  return c;
}

harness::Check validate_aligned_and_shifted(Device& dev, Array<float>& out, size_t n, const std::vector<double>& want,
                                            harness::Tolerance tol, const std::function<void(size_t at)>& run_at) {
  harness::Check c;
  for (size_t at : {size_t{0}, size_t{1}}) {
    out.fill_bytes(0xFF);
    run_at(at);
    dev.synchronize();
    c = harness::merge(c, compare_window(at == 0 ? "out" : "out (start 4 bytes past 16-byte alignment)", out, at, n,
                                         want, tol));
  }
  return c;
}

}  // namespace kernels::cuda::bench
