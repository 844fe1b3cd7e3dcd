// gpt/profile.h: where a training step's time goes, op by op, on any backend.
//
//   ProfilingBackend prof(*be);            // wraps a backend: the same ops, each timed
//   gpt_forward(model, prof, ...); ...     // the model code runs through it unchanged
//   print_profile(std::cout, prof.rows(), steps);
//
// Each op waits for everything before it (Backend::synchronize), runs, and waits for
// itself: on a GPU that removes the overlap of the host's launches with the device's work,
// so the sum is a little more than an unprofiled step (the table says so). Host backends
// are synchronous anyway.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "gpt/backend.h"

namespace gpt {

struct ProfileRow {
  std::string op;     // "matmul_backward"
  int64_t calls = 0;  // over the profiled steps
  double ms = 0.0;    // total
};

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(Backend& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name() + " (profiled)"; }
  std::string precision() const override { return inner_.precision(); }
  Memory& memory() override { return inner_.memory(); }
  bool keeps_preatt() const override { return inner_.keeps_preatt(); }
  bool fuses_residual_layernorm() const override { return inner_.fuses_residual_layernorm(); }
  void synchronize() override { inner_.synchronize(); }
  double measure_peak_flops(int threads, std::string* what) override { return inner_.measure_peak_flops(threads, what); }
  void check_capacity(const GPTConfig& c, int B, int T) override { inner_.check_capacity(c, B, T); }

  // Rows in the order the ops first ran; reset() clears them.
  std::vector<ProfileRow> rows() const { return rows_; }
  void reset() {
    rows_.clear();
    index_.clear();
  }

  void matvec_forward(float* out, const float* inp, const kernels::WeightsView& w, const float* bias,
                      int N) override {
    timed("matvec_forward", [&] { inner_.matvec_forward(out, inp, w, bias, N); });
  }
  void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                        int NH, int maxT) override {
    timed("attention_decode", [&] { inner_.attention_decode(out, kcache, vcache, qkv, B, n, pos, C, NH, maxT); });
  }
  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                       int V) override {
    timed("encoder_forward", [&] { inner_.encoder_forward(out, inp, wte, wpe, B, T, C, V); });
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                        int V) override {
    timed("encoder_backward", [&] { inner_.encoder_backward(dwte, dwpe, dout, inp, B, T, C, V); });
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int N, int C) override {
    timed("layernorm_forward", [&] { inner_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); });
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int N, int C) override {
    timed("layernorm_backward",
          [&] { inner_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C); });
  }
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                      int OC) override {
    timed("matmul_forward", [&] { inner_.matmul_forward(out, inp, weight, bias, N, C, OC); });
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) override {
    timed("matmul_backward", [&] { inner_.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC); });
  }
  void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    timed("attention_forward", [&] { inner_.attention_forward(out, preatt, att, qkv, B, T, C, NH); });
  }
  void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                          const float* att, int B, int T, int C, int NH) override {
    timed("attention_backward",
          [&] { inner_.attention_backward(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH); });
  }
  void gelu_forward(float* out, const float* inp, int64_t n) override {
    timed("gelu_forward", [&] { inner_.gelu_forward(out, inp, n); });
  }
  void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) override {
    timed("gelu_backward", [&] { inner_.gelu_backward(dinp, dout, inp, n); });
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    timed("residual_forward", [&] { inner_.residual_forward(out, a, b, n); });
  }
  void dropout_forward(float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed) override {
    timed("dropout_forward", [&] { inner_.dropout_forward(out, mask, inp, n, p, seed); });
  }
  void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t n) override {
    timed("dropout_backward", [&] { inner_.dropout_backward(dinp, dout, mask, n); });
  }
  float crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                             int V) override {
    float r = 0.0f;
    timed("crossentropy_forward", [&] { r = inner_.crossentropy_forward(probs, losses, logits, targets, N, V); });
    return r;
  }
  void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                             float dloss) override {
    timed("crossentropy_backward", [&] { inner_.crossentropy_backward(dlogits, probs, targets, N, V, dloss); });
  }
  void residual_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* weight, const float* bias, int N, int C) override {
    timed("residual_layernorm_forward", [&] {
      inner_.residual_layernorm_forward(residual_out, ln_out, mean, rstd, a, b, weight, bias, N, C);
    });
  }
  void matmul_gelu_forward(float* pre, float* out, const float* inp, const float* weight, const float* bias, int N,
                           int C, int OC) override {
    timed("matmul_gelu_forward", [&] { inner_.matmul_gelu_forward(pre, out, inp, weight, bias, N, C, OC); });
  }
  double sum_squares(const float* g, int64_t n) override {
    double r = 0.0;
    timed("sum_squares", [&] { r = inner_.sum_squares(g, n); });
    return r;
  }
  void scale(float* x, float s, int64_t n) override {
    timed("scale", [&] { inner_.scale(x, s, n); });
  }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t t) override {
    timed("adamw_update", [&] { inner_.adamw_update(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, t); });
  }

 private:
  template <class F>
  void timed(const char* op, F&& run) {
    inner_.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    inner_.synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto it = index_.find(op);
    if (it == index_.end()) {
      it = index_.emplace(op, rows_.size()).first;
      rows_.push_back({op, 0, 0.0});
    }
    rows_[it->second].calls += 1;
    rows_[it->second].ms += ms;
  }

  Backend& inner_;
  std::vector<ProfileRow> rows_;
  std::map<std::string, size_t> index_;
};

// A table: op, calls per step, ms per step, % of the profiled total; rows sorted by time.
// `steps` divides the totals.
void print_profile(std::ostream& os, std::vector<ProfileRow> rows, int steps);

}  // namespace gpt
