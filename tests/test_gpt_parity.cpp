// tests/test_gpt_parity.cpp: the GPT against PyTorch, number for number.
//
// scripts/gpt_torch.py builds the same model in PyTorch from the same safetensors weights,
// runs forward and backward on the same batch and writes logits, loss, activations and
// every gradient, then 10 AdamW steps' losses. We compare with our naive and cpu backends:
// per tensor, max |ours - torch| / max |torch| < 1e-4 (fp32 both sides).
//
// Tagged [parity]: tests/CMakeLists.txt registers these only when cmake found a Python that
// imports torch (gpt::torch_python(), gpt/bench.h); otherwise one placeholder test says why they skip.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gpt/bench.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "nn/checkpoint.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

constexpr int kSteps = 10;
constexpr float kLr = 1e-3f;

struct ParityRun {
  testing::TempDir dir{"gpt-parity"};
  gpt::GPT model;
  std::vector<int32_t> x, y;
  int B = 3, T = 8;
  std::string torch_out;
};

// A small model with a few random weights, a batch, and PyTorch's answers for them.
// bias = false: nanoGPT's Shakespeare configuration (no biases in Linear and LayerNorm).
ParityRun& parity_run(bool bias) {
  static ParityRun runs[2];
  static bool ready[2] = {false, false};
  ParityRun& r = runs[bias ? 1 : 0];
  if (!ready[bias ? 1 : 0]) {
    gpt::GPTConfig c;
    c.vocab_size = 13;
    c.block_size = 8;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 16;
    c.bias = bias;
    r.model = gpt::gpt_create(c);
    gpt::gpt_init_weights(r.model, 2024);
    // non-trivial LayerNorm affine parameters and biases, so their gradients are exercised
    nn::Rng rng(99);
    for (const auto& s : r.model.slices) {
      if (s.decay) continue;
      for (int64_t i = 0; i < s.numel; ++i) r.model.params_memory[static_cast<size_t>(s.offset + i)] += rng.normal(0.0f, 0.1f);
    }
    r.x.resize(static_cast<size_t>(r.B * r.T));
    r.y.resize(r.x.size());
    for (size_t i = 0; i < r.x.size(); ++i) {
      r.x[i] = static_cast<int32_t>(rng.below(13));
      r.y[i] = static_cast<int32_t>(rng.below(13));
    }
    const nn::CharVocab vocab = nn::build_vocab("abcdefghijkl\n");
    gpt::save_checkpoint(r.dir.file("weights.safetensors"), r.model, vocab, {}, /*with_optimizer=*/false);
    std::vector<float> xf(r.x.begin(), r.x.end()), yf(r.y.begin(), r.y.end());
    nn::save_safetensors(r.dir.file("batch.safetensors"),
                         {{"inputs", {r.B, r.T}, xf.data()}, {"targets", {r.B, r.T}, yf.data()}});
    r.torch_out = r.dir.file("torch.safetensors");
    std::ostringstream cmd;
    cmd << "'" << gpt::torch_python() << "' '" << gpt::torch_script() << "' parity --weights '"
        << r.dir.file("weights.safetensors") << "' --batch '" << r.dir.file("batch.safetensors") << "' --out '"
        << r.torch_out << "' --steps " << kSteps << " --lr " << kLr
        << " --weight-decay 0.1 --beta1 0.9 --beta2 0.99 --eps 1e-8 --grad-clip 1.0";
    const int rc = std::system(cmd.str().c_str());
    INFO(cmd.str());
    REQUIRE(rc == 0);
    ready[bias ? 1 : 0] = true;
  }
  return r;
}

}  // namespace

TEST_CASE("parity: logits, loss, activations and every gradient match PyTorch", "[parity]") {
  const bool bias = GENERATE(true, false);
  INFO("bias " << bias);
  ParityRun& r = parity_run(bias);
  for (const std::string backend : {"naive", "cpu"}) {
    gpt::GPT m = r.model;
    auto be = gpt::make_backend(backend);
    gpt::gpt_zero_grad(m);
    gpt::gpt_forward(m, *be, r.x.data(), r.y.data(), r.B, r.T);
    gpt::gpt_backward(m, *be);
    const std::string ours = r.dir.file("ours_" + backend + ".safetensors");
    gpt::write_dump(ours, m);
    std::vector<std::string> only_ours, only_torch;
    const auto rows = gpt::diff_dumps(ours, r.torch_out, &only_ours, &only_torch);
    int grads = 0;
    bool saw_logits = false, saw_loss = false;
    for (const auto& row : rows) {
      INFO(backend << ": " << row.name << " max rel err " << row.max_rel_err);
      CHECK(row.max_rel_err < 1e-4);
      grads += row.name.rfind("grad.", 0) == 0 ? 1 : 0;
      saw_logits = saw_logits || row.name == "logits";
      saw_loss = saw_loss || row.name == "loss";
    }
    CHECK(saw_logits);
    CHECK(saw_loss);
    CHECK(grads == static_cast<int>(m.slices.size()));  // every parameter's gradient compared
  }
}

TEST_CASE("parity: the first 10 AdamW losses match PyTorch", "[parity]") {
  const bool bias = GENERATE(true, false);
  INFO("bias " << bias);
  ParityRun& r = parity_run(bias);
  const nn::Checkpoint torch = nn::load_safetensors(r.torch_out);
  const nn::Tensor& losses = torch.tensors.at("adamw_losses");
  REQUIRE(losses.numel() == kSteps);
  gpt::AdamWConfig cfg;  // beta1 0.9, beta2 0.99, eps 1e-8, weight decay 0.1
  for (const std::string backend : {"naive", "cpu"}) {
    gpt::GPT m = r.model;
    auto be = gpt::make_backend(backend);
    gpt::StepOptions so;  // the trainer's step: clip 1.0, AdamW at kLr
    so.adamw = cfg;
    so.lr = kLr;
    so.grad_clip = 1.0f;
    so.train = false;  // the PyTorch run has no dropout
    for (int step = 0; step < kSteps; ++step) {
      const gpt::StepResult res = gpt::train_step(m, *be, {{r.x.data(), r.y.data(), 0}}, r.B, r.T, so);
      const float ours = static_cast<float>(res.loss);
      const float theirs = losses.data()[step];
      INFO(backend << " step " << step << ": ours " << ours << " torch " << theirs);
      CHECK(std::fabs(ours - theirs) <= 1e-4f * std::fabs(theirs));
    }
  }
}
