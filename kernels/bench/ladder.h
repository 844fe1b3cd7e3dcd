// kernels/bench/ladder.h: the one problem class the GPT ops' ladders share (kernels/bench/
// gpt_ops.cpp, kernels/bench/llama_ops.cpp): every rung validated against v1, the plain loops.
//
// A problem owns its inputs (random, never all-zero, in misaligned guarded buffers) and
// outputs; before each validation every output is reset (assigned outputs to NaN,
// accumulated or in-place ones to their random start), and v1's outputs on the same start
// are the reference.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/harness.h"
#include "kernels/splitmix64.h"

namespace kernels::bench::kit {

using harness::Check;
using harness::GuardedBuffer;
using harness::Tolerance;

class LadderProblem : public harness::Problem {
 public:
  // A random input in [lo, hi], never written.
  float* input(size_t n, float lo = -1.0f, float hi = 1.0f) {
    GuardedBuffer& b = buffers_.emplace_back(n);
    harness::fill_random(b.span(), next_seed(), lo, hi);
    return b.data();
  }
  // Token ids or targets in [0, V).
  int32_t* ids(size_t n, int V) {
    std::vector<int32_t>& v = id_buffers_.emplace_back(n);
    uint64_t state = next_seed();
    for (int32_t& id : v) {
      state = splitmix64(state);
      id = static_cast<int32_t>(state % static_cast<uint64_t>(V));
    }
    return v.data();
  }
  // An output every version assigns: NaN before each validation (a missed element fails).
  float* output(const std::string& name, size_t n, Tolerance tol) { return add_output(name, n, tol, false, 0, 0); }
  // An output versions accumulate into or update in place: reset to the same random start
  // in [lo, hi] before each validation.
  float* inout(const std::string& name, size_t n, Tolerance tol, float lo = -1.0f, float hi = 1.0f) {
    return add_output(name, n, tol, true, lo, hi);
  }
  // The call of version v on the buffers; v1's results become the reference.
  void finish(std::string shape, double flops, std::vector<double> bytes, std::function<void(size_t)> call) {
    shape_ = std::move(shape);
    flops_ = flops;
    bytes_ = std::move(bytes);
    call_ = std::move(call);
    reset();
    call_(0);
    for (Out& o : outs_) o.want.assign(o.buf->data(), o.buf->data() + o.buf->size());
  }

  std::string shape() const override { return shape_; }
  double flops() const override { return flops_; }
  double bytes(size_t variant) const override { return bytes_[variant < bytes_.size() ? variant : bytes_.size() - 1]; }
  bool flush_between_runs() const override { return !fits_in_cache(bytes_[0]); }
  void run(size_t variant) override { call_(variant); }
  Check validate(size_t variant) override {
    reset();
    call_(variant);
    Check c;
    bool first = true;
    for (const Out& o : outs_) {
      Check one = harness::compare(o.name, o.buf->span(), o.want, o.tol);
      const std::string damage = o.buf->guard_damage(o.name);
      if (!damage.empty()) {
        ++one.mismatches;
        one.report += damage;
      }
      c = first ? one : harness::merge(c, one);
      first = false;
    }
    return c;
  }

 private:
  struct Out {
    std::string name;
    GuardedBuffer* buf;
    Tolerance tol;
    std::vector<float> start;  // empty: NaN
    std::vector<double> want;
  };
  float* add_output(const std::string& name, size_t n, Tolerance tol, bool keep, float lo, float hi) {
    GuardedBuffer& b = buffers_.emplace_back(n);
    Out o{name, &b, tol, {}, {}};
    if (keep) {
      harness::fill_random(b.span(), next_seed(), lo, hi);
      o.start.assign(b.data(), b.data() + n);
    }
    outs_.push_back(std::move(o));
    return b.data();
  }
  void reset() {
    for (Out& o : outs_) {
      float* p = o.buf->data();
      for (size_t i = 0; i < o.buf->size(); ++i) p[i] = o.start.empty() ? GuardedBuffer::kNaN : o.start[i];
    }
  }
  uint64_t next_seed() { return seed_ = splitmix64(seed_); }

 public:
  uint64_t seed_ = 1;

 private:
  std::deque<GuardedBuffer> buffers_;
  std::deque<std::vector<int32_t>> id_buffers_;
  std::vector<Out> outs_;
  std::string shape_;
  double flops_ = 0.0;
  std::vector<double> bytes_;
  std::function<void(size_t)> call_;
};

inline std::string dims_shape(const std::vector<const char*>& names, const std::vector<size_t>& d) {
  std::ostringstream os;
  for (size_t i = 0; i < d.size(); ++i) os << (i ? " " : "") << names[i] << "=" << short_count(d[i]);
  return os.str();
}

// The pieces every description shares: name, summary, how sizes are written, the variants,
// and make = parse the size, then build(dims, seed).
template <class Fn>
harness::OpBench ladder(const char* name, const char* summary, const std::vector<const char*>& dim_names,
                        const char* help, std::vector<std::string> default_sizes, std::vector<std::string> quick_sizes,
                        const std::vector<OpVersion<Fn>>& versions,
                        std::function<std::unique_ptr<LadderProblem>(const std::vector<size_t>&, uint64_t)> build) {
  harness::OpBench op;
  op.name = name;
  op.summary = summary;
  op.size_help = help;
  op.default_sizes = std::move(default_sizes);
  op.quick_sizes = std::move(quick_sizes);
  op.variants = harness::variants_of(versions);
  const std::string op_name = name, help_text = help;
  const size_t count = dim_names.size();
  op.check_size = [op_name, help_text, count](const std::string& size) { parse_dims(op_name, size, count, help_text); };
  op.make = [op_name, help_text, count, build](const std::string& size,
                                               uint64_t seed) -> std::unique_ptr<harness::Problem> {
    return build(parse_dims(op_name, size, count, help_text), seed);
  };
  return op;
}

inline std::unique_ptr<LadderProblem> problem(uint64_t seed) {
  auto p = std::make_unique<LadderProblem>();
  p->seed_ = seed * 0x9E3779B97F4A7C15ull + 17;
  return p;
}

inline double f(size_t x) { return static_cast<double>(x); }

}  // namespace kernels::bench::kit
