// tests/test_gpt_cuda.cpp: the cuda backend (gpt/backend_cuda.h) against the cpu backend on
// the same weights and batch: logits, loss, every gradient, then 10 AdamW steps; through the
// CUDA emulator in the default run, and on the GPU when there is one (tag [device]). Also:
// checkpoints moving between backends, sampling, and the errors (no GPU, precision the
// device lacks, too little device memory).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend_cuda.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/profile.h"
#include "gpt/train.h"
#include "kernels/cuda/device.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace kc = kernels::cuda;

namespace {

// max |a - b| / max |b| over n floats
double rel_err(const std::vector<float>& a, const std::vector<float>& b, size_t at = 0, size_t n = 0) {
  if (n == 0) n = b.size() - at;
  double err = 0.0, scale = 0.0;
  for (size_t i = at; i < at + n; ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return scale > 0 ? err / scale : err;
}

gpt::GPTConfig small_config(float dropout, bool bias) {
  gpt::GPTConfig c;
  c.vocab_size = 23;
  c.block_size = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 24;  // head size 12: not a multiple of the tiles
  c.dropout = dropout;
  c.bias = bias;
  return c;
}

std::vector<int32_t> random_ids(size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return v;
}

// Tolerances. logits and grads: relative to each tensor's largest magnitude (max |a-b| /
// max |b|); loss: relative. fp32: both backends compute in float with different summation
// orders (tiles vs SIMD panels), so the difference is rounding, ~1e-6 relative per op,
// growing through the layers. TF32 and bf16 round the matmul inputs to 10 and 7 stored
// mantissa bits: ~5e-4 and ~4e-3 per operand. params: after 10 AdamW steps, max |a-b| in
// units of 10 lr, the most an AdamW step of size ~lr can move a weight in 10 steps (biases
// start at 0, so "relative to the tensor" would measure the updates against themselves).
// AdamW divides m by sqrt(v), so a gradient component known to 1% moves its weight by a
// step known to about 1%, whatever its size: these are the widest of the tolerances.
struct Tolerance {
  double logits, loss, grads, params;
};
Tolerance tolerance_for(const std::string& precision) {
  if (precision == "fp32") return {1e-5, 1e-5, 1e-4, 2e-3};
  if (precision == "tf32") return {5e-3, 1e-3, 5e-2, 0.1};
  return {3e-2, 5e-3, 2e-1, 0.5};  // bf16
}

// max |a - b| over n floats from `at`
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b, size_t at, size_t n) {
  double err = 0.0;
  for (size_t i = at; i < at + n; ++i) err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
  return err;
}

// The whole check on one device at one precision.
void agree_with_cpu(kc::Device& dev, const std::string& precision, float dropout, bool bias) {
  const gpt::GPTConfig c = small_config(dropout, bias);
  const int B = 3, T = 11;  // T < block_size, N = 33
  const Tolerance tol = tolerance_for(precision);
  auto cpu = gpt::make_backend("cpu");
  auto cuda = gpt::make_cuda_backend(dev, precision);
  INFO(cuda->name() << ", dropout " << dropout << ", bias " << bias);

  gpt::GPT a = gpt::gpt_create(c);
  gpt::gpt_init_weights(a, 5);
  gpt::GPT b = gpt::gpt_move_to(a, cuda->memory());
  REQUIRE_FALSE(gpt::gpt_memory(b).is_host());
  CHECK(b.params_memory.to_vector() == a.params_memory.to_vector());

  const auto x = random_ids(static_cast<size_t>(B) * T, c.vocab_size, 1);
  const auto y = random_ids(static_cast<size_t>(B) * T, c.vocab_size, 2);

  // one forward and backward, in train mode (the same dropout masks on both)
  for (gpt::GPT* m : {&a, &b}) {
    gpt::Backend& be = m == &a ? *cpu : *cuda;
    gpt::gpt_zero_grad(*m);
    gpt::gpt_forward(*m, be, x.data(), y.data(), B, T, /*train=*/true, 77);
    gpt::gpt_backward(*m, be);
  }
  CHECK(std::fabs(b.mean_loss - a.mean_loss) <= tol.loss * std::fabs(a.mean_loss));
  // neither attention keeps the scores before the softmax (their backwards read att only)
  CHECK(a.acts.preatt == nullptr);
  CHECK(b.acts.preatt == nullptr);
  CHECK(b.acts_memory.size() == a.acts_memory.size());
  const size_t NV = static_cast<size_t>(B) * T * c.vocab_size;
  std::vector<float> la(NV), lb(NV);
  gpt::gpt_memory(a).to_host(la.data(), a.acts.logits, NV * sizeof(float));
  gpt::gpt_memory(b).to_host(lb.data(), b.acts.logits, NV * sizeof(float));
  CHECK(rel_err(lb, la) < tol.logits);
  const auto ga = a.grads_memory.to_vector(), gb = b.grads_memory.to_vector();
  for (const auto& s : a.slices) {
    INFO("gradient of " << s.name);
    CHECK(rel_err(gb, ga, static_cast<size_t>(s.offset), static_cast<size_t>(s.numel)) < tol.grads);
  }

  // then 10 AdamW steps on fresh batches, the trainer's step: losses and weights stay together
  gpt::StepOptions so;  // lr 1e-3, clip 1, default AdamW
  for (int step = 0; step < 10; ++step) {
    const auto xs = random_ids(static_cast<size_t>(B) * T, c.vocab_size, 100 + step);
    const auto ys = random_ids(static_cast<size_t>(B) * T, c.vocab_size, 200 + step);
    float losses[2] = {0, 0}, norms[2] = {0, 0};
    for (gpt::GPT* m : {&a, &b}) {
      gpt::Backend& be = m == &a ? *cpu : *cuda;
      const int i = m == &a ? 0 : 1;
      const gpt::StepResult r =
          gpt::train_step(*m, be, {{xs.data(), ys.data(), 1000 + static_cast<uint64_t>(step)}}, B, T, so);
      losses[i] = static_cast<float>(r.loss);
      norms[i] = r.grad_norm;
    }
    INFO("step " << step + 1);
    CHECK(std::fabs(losses[1] - losses[0]) <= tol.loss * std::fabs(losses[0]) + 1e-6);
    CHECK(std::fabs(norms[1] - norms[0]) <= tol.grads * std::fabs(norms[0]));
  }
  // The k third of c_attn.bias is left out: its true gradient is exactly zero (adding the
  // same b_k . q_t to every score of row t changes no softmax), so each backend hands AdamW
  // its own rounding noise, which AdamW's m / sqrt(v) scales up to lr-sized steps in
  // unrelated directions. The q and v thirds are compared like every other tensor.
  const auto pa = a.params_memory.to_vector(), pb = b.params_memory.to_vector();
  const auto C = static_cast<size_t>(c.n_embd);
  const double movement = 10.0 * so.lr;
  for (const auto& s : a.slices) {
    INFO("weights of " << s.name << " after 10 AdamW steps (difference in units of 10 lr)");
    const auto at = static_cast<size_t>(s.offset);
    if (s.name.find("attn.c_attn.bias") != std::string::npos) {
      CHECK(max_abs_diff(pb, pa, at, C) / movement < tol.params);
      CHECK(max_abs_diff(pb, pa, at + 2 * C, C) / movement < tol.params);
    } else {
      CHECK(max_abs_diff(pb, pa, at, static_cast<size_t>(s.numel)) / movement < tol.params);
    }
  }
  CHECK(b.adam_t == 10);
  const auto mb = b.m_memory.to_vector(), ma = a.m_memory.to_vector();
  CHECK(rel_err(mb, ma) < tol.grads);
}

}  // namespace

TEST_CASE("gpt cuda (emulated): fp32 agrees with the cpu backend: logits, loss, gradients, 10 AdamW steps",
          "[gpt][cuda]") {
  for (const auto& [dropout, bias] : {std::pair{0.0f, true}, std::pair{0.2f, false}}) {
    agree_with_cpu(kc::emulator(), "fp32", dropout, bias);
  }
}

TEST_CASE("gpt cuda (emulated): tf32 and bf16 tensor-core matmuls agree within their rounding", "[gpt][cuda]") {
  REQUIRE(kc::emulator().info().sm >= 80);
  agree_with_cpu(kc::emulator(), "tf32", 0.0f, true);
  agree_with_cpu(kc::emulator(), "bf16", 0.0f, true);
}

TEST_CASE("gpt cuda gpu: the backend agrees with the cpu backend on the GPU", "[gpt][cuda][device]") {
  std::string why;
  kc::Device* gpu = kc::gpu(&why);
  if (!gpu) {
    std::cout << "SKIPPED: no GPU (" << why << ")\n";
    return;
  }
  agree_with_cpu(*gpu, "fp32", 0.0f, true);
  agree_with_cpu(*gpu, "fp32", 0.2f, false);
  if (gpu->info().sm >= 80) {
    agree_with_cpu(*gpu, "tf32", 0.0f, true);
    agree_with_cpu(*gpu, "bf16", 0.0f, true);
  }
}

TEST_CASE("gpt cuda (emulated): the same inputs give bit-identical results run after run", "[gpt][cuda]") {
  const gpt::GPTConfig c = small_config(0.1f, true);
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  const auto x = random_ids(2 * 12, c.vocab_size, 1), y = random_ids(2 * 12, c.vocab_size, 2);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    gpt::GPT m = gpt::gpt_create(c, cuda->memory());
    gpt::gpt_init_weights(m, 3);
    gpt::train_step(m, *cuda, {{x.data(), y.data(), 9}}, 2, 12, gpt::StepOptions{});
    const auto p = m.params_memory.to_vector();
    if (run == 0) first = p;
    else CHECK(p == first);
  }
}

TEST_CASE("gpt cuda (emulated): a complete table, read by kernel_plan and profiling, and profiling changes no number",
          "[gpt][cuda]") {
  const gpt::Backend cuda = gpt::cuda_backend(kc::emulator(), "fp32");
  int ops = 0;
  gpt::for_each_op(cuda, [&](const char* op, const auto& fn) {
    INFO(op);
    CHECK(static_cast<bool>(fn));
    ++ops;
  });
  CHECK(ops == 31);
  CHECK(cuda.precision() == "fp32");
  CHECK_FALSE(cuda.keeps_preatt());
  CHECK_FALSE(cuda.memory().is_host());
  CHECK_FALSE(gpt::kernel_plan(cuda).empty());
  CHECK_THAT(testing::error_of([] { gpt::kernel_plan(*gpt::make_backend("cpu")); }),
             Catch::Contains("not the cuda backend"));

  gpt::Profile prof;
  gpt::Backend timed = gpt::profiled(cuda, prof);
  CHECK(timed.name() == cuda.name() + " (profiled)");
  CHECK(&timed.memory() == &cuda.memory());
  CHECK(gpt::kernel_plan(timed) == gpt::kernel_plan(cuda));
  // one step plain and one profiled, from the same weights: the same parameters bit for bit
  const gpt::GPTConfig c = small_config(0.1f, true);
  const auto x = random_ids(2 * 12, c.vocab_size, 1), y = random_ids(2 * 12, c.vocab_size, 2);
  std::vector<float> params[2];
  for (int run = 0; run < 2; ++run) {
    gpt::Backend be = run == 0 ? cuda : timed;
    gpt::GPT m = gpt::gpt_create(c, be.memory());
    gpt::gpt_init_weights(m, 3);
    gpt::train_step(m, be, {{x.data(), y.data(), 9}}, 2, 12, gpt::StepOptions{});
    params[run] = m.params_memory.to_vector();
  }
  CHECK(params[0] == params[1]);
  CHECK_FALSE(prof.rows().empty());
}

TEST_CASE("gpt cuda (emulated): train, checkpoint on cuda, resume on cpu, sample on cuda", "[gpt][cuda]") {
  testing::TempDir dir("gpt_cuda");
  std::string text;
  for (int i = 0; i < 30; ++i) text += "To be, or not to be: that is the question.\n";
  const std::string corpus = dir.file("corpus.txt");
  std::ofstream(corpus) << text;
  gpt::TrainOptions o;
  o.n_layer = 1;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 8;
  o.batch_size = 2;
  o.max_iters = 4;
  o.warmup_iters = 1;
  o.eval_interval = 2;
  o.eval_iters = 1;
  o.data = corpus;
  o.log = "none";
  o.quiet = true;
  o.precision = "fp32";

  // the reference: 4 steps on the cpu backend
  gpt::TrainOptions ref = o;
  ref.backend = "cpu";
  ref.out_dir = dir.file("ref");
  std::ostringstream log_ref;
  const gpt::TrainResult r_ref = gpt::train(ref, log_ref);

  // 2 steps on cuda (the emulator), then 2 more on cpu from its checkpoint
  ::setenv("NNLAB_DEVICE", "emu", 1);
  gpt::TrainOptions first = o;
  first.backend = "cuda";
  first.max_iters = 2;
  first.out_dir = dir.file("cuda");
  first.sample_tokens = 12;
  std::ostringstream log_cuda;
  const gpt::TrainResult r_cuda = gpt::train(first, log_cuda);
  ::unsetenv("NNLAB_DEVICE");
  REQUIRE(r_cuda.steps == 2);
  INFO(log_cuda.str());
  CHECK(log_cuda.str().find("---- sample") != std::string::npos);  // sampled on cuda from its checkpoint
  for (int i = 0; i < 2; ++i) {
    CHECK(std::fabs(r_cuda.step_losses[static_cast<size_t>(i)] - r_ref.step_losses[static_cast<size_t>(i)]) < 1e-4);
  }
  gpt::TrainOptions second = o;
  second.backend = "cpu";
  second.resume = r_cuda.last_path;
  second.out_dir = dir.file("resumed");
  std::ostringstream log_resumed;
  const gpt::TrainResult r_resumed = gpt::train(second, log_resumed);
  REQUIRE(r_resumed.steps == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(std::fabs(r_resumed.step_losses[static_cast<size_t>(i)] - r_ref.step_losses[static_cast<size_t>(i) + 2]) < 1e-4);
  }
  // and a checkpoint of the cpu run loads onto the cuda backend bit for bit
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  const gpt::LoadedCheckpoint on_host = gpt::load_checkpoint(r_ref.last_path);
  const gpt::LoadedCheckpoint on_dev = gpt::load_checkpoint(r_ref.last_path, cuda->memory());
  CHECK_FALSE(gpt::gpt_memory(on_dev.model).is_host());
  CHECK(on_dev.model.params_memory.to_vector() == on_host.model.params_memory.to_vector());
  CHECK(on_dev.model.v_memory.to_vector() == on_host.model.v_memory.to_vector());
}

TEST_CASE("gpt cuda: clear errors for no GPU, a precision the device lacks, too little memory", "[gpt][cuda]") {
  // no GPU (this machine, CI): the message says why and how to use the emulator
  std::string why;
  if (kc::gpu(&why) == nullptr && std::getenv("NNLAB_DEVICE") == nullptr) {
    const std::string e = testing::error_of([] { gpt::make_backend("cuda"); });
    CHECK_THAT(e, Catch::Contains("no usable GPU"));
    CHECK_THAT(e, Catch::Contains("NNLAB_DEVICE=emu"));
  }
  // bf16 / tf32 on a compute capability 7.5 GPU
  const std::string e75 = testing::error_of([] { gpt::choose_precision("bf16", 75, "Tesla T4"); });
  CHECK_THAT(e75, Catch::Contains("8.0") && Catch::Contains("Tesla T4 is 7.5") && Catch::Contains("--precision fp32"));
  CHECK(gpt::choose_precision("auto", 75, "T4") == gpt::Precision::fp32);
  CHECK(gpt::choose_precision("auto", 90, "H100") == gpt::Precision::bf16);
  CHECK_THAT(testing::error_of([] { gpt::choose_precision("fp8", 90, "H100"); }), Catch::Contains("fp32, tf32 or bf16"));
  // host backends are fp32 only
  CHECK_THAT(testing::error_of([] { gpt::make_backend("cpu", "bf16"); }), Catch::Contains("needs --backend cuda"));
  // too little memory: the parts, what is needed, what is free
  gpt::GPTConfig big;
  big.vocab_size = 65;
  big.block_size = 256;
  big.n_layer = 6;
  big.n_head = 6;
  big.n_embd = 384;
  const std::string oom = testing::error_of([&] { gpt::check_device_memory(big, 64, 256, size_t{1} << 30, "a 1 GiB GPU"); });
  CHECK_THAT(oom, Catch::Contains("not enough device memory on a 1 GiB GPU"));
  CHECK_THAT(oom, Catch::Contains("parameters") && Catch::Contains("gradients") && Catch::Contains("AdamW") &&
                      Catch::Contains("activations") && Catch::Contains("1024 MiB is free"));
  CHECK_NOTHROW(gpt::check_device_memory(big, 1, 16, size_t{1} << 30, "a 1 GiB GPU"));
  // a model in host memory given to the cuda backend is refused, not silently read
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  gpt::GPT host_model = gpt::gpt_create(small_config(0.0f, true));
  const std::vector<int32_t> ids(4, 1);
  CHECK_THAT(testing::error_of([&] { gpt::gpt_forward(host_model, *cuda, ids.data(), nullptr, 1, 4); }),
             Catch::Contains("gpt_move_to"));
}

TEST_CASE("gpt cuda (emulated): arch=llama (RMSNorm, RoPE, SwiGLU, grouped-query flash attention) agrees with the cpu backend", "[gpt][cuda]") {
  // head size 32: a size the CUDA flash kernels are built for
  gpt::GPTConfig c;
  c.arch = gpt::Arch::llama;
  c.bias = false;
  c.vocab_size = 13;
  c.block_size = 9;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 64;
  c.n_kv_head = 1;
  c.ffn_hidden = 40;
  c.tie_embeddings = false;
  auto cpu = gpt::make_backend("cpu");
  auto cuda = gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
  gpt::GPT a = gpt::gpt_create(c);
  gpt::gpt_init_weights(a, 5);
  gpt::GPT b = gpt::gpt_move_to(a, cuda->memory());
  const int B = 2, T = 9;
  const auto x = random_ids(static_cast<size_t>(B) * T, c.vocab_size, 1);
  const auto y = random_ids(static_cast<size_t>(B) * T, c.vocab_size, 2);
  float losses[2][3];
  for (int i = 0; i < 2; ++i) {
    gpt::GPT& m = i == 0 ? a : b;
    gpt::Backend& be = i == 0 ? *cpu : *cuda;
    gpt::gpt_zero_grad(m);
    gpt::gpt_forward(m, be, x.data(), y.data(), B, T);
    gpt::gpt_backward(m, be);
  }
  CHECK(b.mean_loss == Approx(a.mean_loss).epsilon(1e-5));
  const auto ga = a.grads_memory.to_vector(), gb = b.grads_memory.to_vector();
  for (const auto& s : a.slices) {
    INFO("gradient of " << s.name);
    CHECK(rel_err(gb, ga, static_cast<size_t>(s.offset), static_cast<size_t>(s.numel)) < 1e-4);
  }
  for (int i = 0; i < 2; ++i) {
    gpt::GPT& m = i == 0 ? a : b;
    for (int step = 0; step < 3; ++step) {
      losses[i][step] = static_cast<float>(
          gpt::train_step(m, i == 0 ? *cpu : *cuda, {{x.data(), y.data(), 0}}, B, T, gpt::StepOptions{}).loss);
    }
  }
  for (int step = 0; step < 3; ++step) CHECK(losses[1][step] == Approx(losses[0][step]).epsilon(1e-5));

  // the KV-cache decoder (RoPE at the cache position, one KV head for two query heads): the
  // cuda decoder's logits against the cpu decoder's, batch 2, a prefill of 4, then steps
  const gpt::InferenceModel hm = gpt::pack_model(a, kernels::WeightFormat::f32);
  const gpt::InferenceModel dm = gpt::pack_model(a, kernels::WeightFormat::f32, cuda->memory());
  gpt::Decoder dh(hm, *cpu, 2), dd(dm, *cuda, 2);
  const std::vector<float> p0 = dh.step(x.data(), 2, 4);  // the first 8 ids as two sequences of 4
  const std::vector<float> p1 = dd.step(x.data(), 2, 4);
  CHECK(rel_err(p1, p0) < 1e-5);
  for (int t = 4; t < T; ++t) {
    const int32_t pair[2] = {x[static_cast<size_t>(t)], x[static_cast<size_t>(T + t)]};
    const std::vector<float> u = dh.step(pair, 2, 1);
    const std::vector<float> w = dd.step(pair, 2, 1);
    INFO("position " << t);
    CHECK(rel_err(w, u) < 1e-5);
  }
}
