// tests/test_llama_parity.cpp: the llama-style GPT (arch = llama) against PyTorch, number for number.
//
// scripts/llama_torch.py builds the same model the way Hugging Face's Llama is written
// (RMSNorm, rotate-half RoPE, repeat_kv, SwiGLU; tests/python/test_llama_torch.py shows it
// computes exactly what transformers' LlamaForCausalLM computes) from the same safetensors
// checkpoint, runs forward and backward on the same batch and writes logits, loss, the named
// activations and every gradient, then 10 AdamW steps' losses and gradient norms. We compare
// the naive, cpu and cuda (through the CUDA emulator) backends: per tensor, max |ours - torch|
// / max |torch| < 1e-4 (fp32 both sides), as tests/test_gpt_parity.cpp does for GPT-2.
//
// The configurations: multi-head (n_kv_head = n_head, once with full attention), grouped-query
// (4 query heads on 2 KV heads) and multi-query (1 KV head), each with the head tied to wte
// and with its own lm_head; RoPE's theta and RMSNorm's eps away from their defaults in some.
//
// Tagged [parity]: tests/CMakeLists.txt registers these only when cmake found a Python that
// imports torch (gpt::torch_python(), gpt/bench.h); otherwise one placeholder test says why they skip.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

#include "gpt/backend_cuda.h"
#include "gpt/bench.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "kernels/cuda/device.h"
#include "nn/checkpoint.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

constexpr int kSteps = 10;
constexpr float kLr = 1e-3f;

struct LlamaCase {
  const char* name;
  int n_kv_head;
  bool tied;
  gpt::AttentionKind attention;
  float rope_theta, norm_eps;
};
// n_head 4, n_embd 32: head size 8 (RoPE pairs 0-4, 1-5, 2-6, 3-7)
constexpr std::array<LlamaCase, 6> kCases = {{
    {"MHA tied", 4, true, gpt::AttentionKind::automatic, 10000.0f, 1e-5f},
    {"MHA untied, full attention", 4, false, gpt::AttentionKind::full, 10000.0f, 1e-5f},
    {"GQA tied", 2, true, gpt::AttentionKind::automatic, 500.0f, 1e-6f},
    {"GQA untied", 2, false, gpt::AttentionKind::automatic, 500.0f, 1e-6f},
    {"MQA tied", 1, true, gpt::AttentionKind::automatic, 10000.0f, 1e-5f},
    {"MQA untied", 1, false, gpt::AttentionKind::flash, 10000.0f, 1e-5f},
}};

struct ParityRun {
  testing::TempDir dir{"llama-parity"};
  gpt::GPT model;
  std::vector<int32_t> x, y;
  int B = 3, T = 11;  // T < block_size
  std::string torch_out;
};

// A small llama model with random weights, a batch, and PyTorch's answers for them.
ParityRun& parity_run(size_t which) {
  static std::array<ParityRun, kCases.size()> runs;
  static std::array<bool, kCases.size()> ready{};
  ParityRun& r = runs[which];
  if (!ready[which]) {
    const LlamaCase& lc = kCases[which];
    gpt::GPTConfig c;
    c.arch = gpt::Arch::llama;
    c.bias = false;
    c.vocab_size = 29;
    c.block_size = 12;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_kv_head = lc.n_kv_head;
    c.n_embd = 32;
    c.ffn_hidden = 40;  // not the default 96, and not a multiple of the SIMD width
    c.rope_theta = lc.rope_theta;
    c.norm_eps = lc.norm_eps;
    c.tie_embeddings = lc.tied;
    c.attention = lc.attention;
    r.model = gpt::gpt_create(c);
    gpt::gpt_init_weights(r.model, 2024);
    // RMSNorm gains away from 1, so their gradients and their use are exercised
    nn::Rng rng(99);
    for (const auto& s : r.model.slices) {
      if (s.decay) continue;
      for (int64_t i = 0; i < s.numel; ++i) r.model.params_memory[static_cast<size_t>(s.offset + i)] += rng.normal(0.0f, 0.1f);
    }
    r.x.resize(static_cast<size_t>(r.B * r.T));
    r.y.resize(r.x.size());
    for (size_t i = 0; i < r.x.size(); ++i) {
      r.x[i] = static_cast<int32_t>(rng.below(29));
      r.y[i] = static_cast<int32_t>(rng.below(29));
    }
    const nn::CharVocab vocab = nn::build_vocab("abcdefghijklmnopqrstuvwxyz.,\n");  // 29 = V
    gpt::save_checkpoint(r.dir.file("weights.safetensors"), r.model, vocab, {}, /*with_optimizer=*/false);
    std::vector<float> xf(r.x.begin(), r.x.end()), yf(r.y.begin(), r.y.end());
    nn::save_safetensors(r.dir.file("batch.safetensors"),
                         {{"inputs", {r.B, r.T}, xf.data()}, {"targets", {r.B, r.T}, yf.data()}});
    r.torch_out = r.dir.file("torch.safetensors");
    std::ostringstream cmd;
    cmd << "'" << gpt::torch_python() << "' '" << gpt::llama_torch_script() << "' parity --weights '"
        << r.dir.file("weights.safetensors") << "' --batch '" << r.dir.file("batch.safetensors") << "' --out '"
        << r.torch_out << "' --steps " << kSteps << " --lr " << kLr
        << " --weight-decay 0.1 --beta1 0.9 --beta2 0.99 --eps 1e-8 --grad-clip 1.0";
    const int rc = std::system(cmd.str().c_str());
    INFO(cmd.str());
    REQUIRE(rc == 0);
    ready[which] = true;
  }
  return r;
}

// naive, cpu, and cuda at fp32 on the CUDA emulator (the model moved into its memory)
const char* const kBackends[] = {"naive", "cpu", "cuda (emulated)"};
std::unique_ptr<gpt::Backend> backend_named(const std::string& name) {
  if (name == "cuda (emulated)") return gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
  return gpt::make_backend(name);
}

}  // namespace

TEST_CASE("llama parity: logits, loss, activations and every gradient match PyTorch (HF Llama)", "[parity][llama]") {
  const size_t which = GENERATE(range(size_t{0}, kCases.size()));
  INFO(kCases[which].name);
  ParityRun& r = parity_run(which);
  for (const std::string backend : kBackends) {
    auto be = backend_named(backend);
    gpt::GPT m = gpt::gpt_move_to(r.model, be->memory());
    gpt::gpt_zero_grad(m);
    gpt::gpt_forward(m, *be, r.x.data(), r.y.data(), r.B, r.T);
    gpt::gpt_backward(m, *be);
    const std::string ours = r.dir.file("ours_" + std::to_string(which) + "_" + backend.substr(0, 4) + ".safetensors");
    gpt::write_dump(ours, m);
    std::vector<std::string> only_ours, only_torch;
    const auto rows = gpt::diff_dumps(ours, r.torch_out, &only_ours, &only_torch);
    int grads = 0;
    double worst = 0.0;
    std::string worst_name;
    bool saw_logits = false, saw_loss = false, saw_qkv = false, saw_swiglu = false;
    for (const auto& row : rows) {
      INFO(backend << ": " << row.name << " max rel err " << row.max_rel_err);
      CHECK(row.max_rel_err < 1e-4);
      if (row.max_rel_err >= worst) {
        worst = row.max_rel_err;
        worst_name = row.name;
      }
      grads += row.name.rfind("grad.", 0) == 0 ? 1 : 0;
      saw_logits = saw_logits || row.name == "logits";
      saw_loss = saw_loss || row.name == "loss";
      saw_qkv = saw_qkv || row.name == "h.1.qkv";  // RoPE applied to q and k on both sides
      saw_swiglu = saw_swiglu || row.name == "h.1.fch_swiglu";
    }
    WARN(kCases[which].name << ", " << backend << ": " << rows.size() << " tensors compared, worst max rel err "
                            << worst << " (" << worst_name << ")");
    CHECK(saw_logits);
    CHECK(saw_loss);
    CHECK(saw_qkv);
    CHECK(saw_swiglu);
    CHECK(grads == static_cast<int>(m.slices.size()));  // every parameter's gradient compared
    // untied: wte and lm_head are separate parameters, each with its own gradient
    CHECK(std::count_if(m.slices.begin(), m.slices.end(), [](const gpt::ParamSlice& s) { return s.name == "lm_head.weight"; }) ==
          (kCases[which].tied ? 0 : 1));
  }
}

TEST_CASE("llama parity: the first 10 AdamW losses and gradient norms match PyTorch", "[parity][llama]") {
  const size_t which = GENERATE(range(size_t{0}, kCases.size()));
  INFO(kCases[which].name);
  ParityRun& r = parity_run(which);
  const nn::Checkpoint torch = nn::load_safetensors(r.torch_out);
  const nn::Tensor& losses = torch.tensors.at("adamw_losses");
  const nn::Tensor& norms = torch.tensors.at("adamw_grad_norms");
  REQUIRE(losses.numel() == kSteps);
  REQUIRE(norms.numel() == kSteps);
  gpt::AdamWConfig cfg;  // beta1 0.9, beta2 0.99, eps 1e-8, weight decay 0.1
  for (const std::string backend : kBackends) {
    auto be = backend_named(backend);
    gpt::GPT m = gpt::gpt_move_to(r.model, be->memory());
    gpt::StepOptions so;  // the trainer's step: clip 1.0, AdamW at kLr
    so.adamw = cfg;
    so.lr = kLr;
    so.grad_clip = 1.0f;
    so.train = false;  // the PyTorch run has no dropout
    double worst = 0.0;
    for (int step = 0; step < kSteps; ++step) {
      const gpt::StepResult res = gpt::train_step(m, *be, {{r.x.data(), r.y.data(), 0}}, r.B, r.T, so);
      const float ours = static_cast<float>(res.loss);
      const float theirs = losses.data()[step];
      INFO(backend << " step " << step << ": ours " << ours << " torch " << theirs << "; grad norm ours "
                   << res.grad_norm << " torch " << norms.data()[step]);
      CHECK(std::fabs(ours - theirs) <= 1e-4f * std::fabs(theirs));
      CHECK(std::fabs(res.grad_norm - norms.data()[step]) <= 1e-4f * std::fabs(norms.data()[step]));
      worst = std::max(worst, std::fabs(static_cast<double>(ours) - theirs) / std::fabs(theirs));
    }
    WARN(kCases[which].name << ", " << backend << ": 10 AdamW losses, worst rel err " << worst);
  }
}
