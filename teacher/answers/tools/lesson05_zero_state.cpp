// Lesson 05 question 3: the char RNN of `nnlab lesson05 --part chars`, trained as the program
// trains it (same model, seed, data order, Adam, cosine lr, clipping), with one switch: "carry"
// keeps the state across chunks (the program), "zero" resets it before every training chunk.
// Validation as in the program (the validation text as streams, state carried across chunks).
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include "io/text.h"
#include "lessons/05-rnn/seq_tasks.h"
#include "nn/ops.h"
#include "nn/optim.h"
int main(int argc, char** argv) {
  const bool zero = std::string(argv[1]) == "zero";
  const int64_t iters = argc > 2 ? std::atoll(argv[2]) : 2000;
  const int T = 64, B = 32, H = 256;
  const float lr0 = 3e-3f, min_frac = 0.1f;
  const nn::TextCorpus corpus = nn::load_corpus(argv[3]);
  const int V = corpus.vocab.size();
  nn::StreamBatcher batcher(corpus.train, B, T);
  const int val_B = static_cast<int>(std::min<int64_t>(B, (static_cast<int64_t>(corpus.val.size()) - 1) / T));
  nn::Rng rng(42);
  seqlab::SeqModel model(nn::CellType::RNN, V, H, V, rng);
  std::vector<nn::Param> params = model.params();
  nn::Adam adam(params, nn::AdamConfig{lr0, 0.9f, 0.999f, 1e-8f, 0.0f});
  std::vector<int32_t> x, y;
  std::vector<float> xs, probs, losses, dlogits;
  auto validate = [&]() {
    nn::StreamBatcher vb(corpus.val, val_B, T);
    model.reset_state();
    std::vector<int32_t> vx, vy;
    std::vector<float> vxs, vp, vl;
    double sum = 0.0;
    int64_t chunks = 0;
    while (vb.next(vx, vy)) {
      const int N = T * val_B;
      seqlab::one_hot(vxs, vx, V);
      const float* logits = model.forward(vxs.data(), T, val_B);
      vp.resize(static_cast<size_t>(N) * V);
      vl.resize(static_cast<size_t>(N));
      sum += nn::softmax_cross_entropy_forward(vp.data(), vl.data(), logits, vy.data(), N, V);
      ++chunks;
    }
    model.reset_state();
    return sum / static_cast<double>(chunks);
  };
  double loss_sum = 0.0;
  for (int64_t it = 1; it <= iters; ++it) {
    adam.config().lr = nn::cosine_lr(lr0, min_frac, static_cast<double>(it - 1) / static_cast<double>(iters));
    nn::zero_grads(params);
    if (!batcher.next(x, y)) {
      batcher.restart();
      model.reset_state();
      batcher.next(x, y);
    }
    if (zero) model.reset_state();
    const int N = T * B;
    seqlab::one_hot(xs, x, V);
    const float* logits = model.forward(xs.data(), T, B);
    probs.resize(static_cast<size_t>(N) * V);
    losses.resize(static_cast<size_t>(N));
    dlogits.resize(static_cast<size_t>(N) * V);
    loss_sum += nn::softmax_cross_entropy_forward(probs.data(), losses.data(), logits, y.data(), N, V);
    nn::softmax_cross_entropy_backward(dlogits.data(), probs.data(), y.data(), N, V);
    model.backward(dlogits.data());
    nn::clip_grad_norm(params, 1.0);
    adam.step();
    if (it % 200 == 0 || it == iters) {
      std::cout << (zero ? "zero " : "carry") << " iter " << it << " train " << loss_sum / 200.0 << " val " << validate()
                << std::endl;
      loss_sum = 0.0;
    }
  }
}
