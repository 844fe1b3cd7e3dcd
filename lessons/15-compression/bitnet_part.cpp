// Lesson 15, part bitnet: BitNet b1.58 trained from scratch against fp32.
//
// Four runs of the trainer (gpt::train, lesson 08's loop) on the same corpus, batches and
// schedule as lesson 10's model:
//   fp32              lesson 10's configuration (4 layers, C 256)
//   ternary           the same configuration with --ternary: every block Linear's forward and
//                     backward see clamp(round(W / mean|W|), -1, 1) mean|W| (absmean), the
//                     gradients go straight through to fp32 latent weights (gpt/compress.h)
//   fp32, same bytes  an fp32 model whose block Linears hold as many bytes as the ternary
//                     model's at 2 bits a weight: C / 4 (the Linears' weights grow as C^2)
//   W1.58A8           BitNet b1.58's whole recipe (--ternary-a8): the ternary weights, and
//                     every block Linear's INPUT rounded per token to int8 (absmax / 127,
//                     kernels::quantize_rows_int8's rounding) in the forward, the gradient
//                     passing the rounding unchanged (gpt/compress.h, set_int8_activations)
// The training loss of every step (kept as a curve, averaged over windows) and the final
// validation loss of each (the ternary runs evaluated with their ternary weights, W1.58A8's
// with its int8-rounded Linear inputs too: each run's number is its own inference forward).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "gpt/train.h"
#include "lessons/15-compression/compression_lesson.h"

namespace lesson15 {

namespace {

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

}  // namespace

int run_bitnet_part(const Options& opts) {
  namespace fs = std::filesystem;
  struct Run {
    std::string name;
    int n_embd;
    bool ternary;
    gpt::TrainResult result;
    bool a8 = false;            // int8 activations too (W1.58A8)
    double linear_bytes = 0.0;  // the block Linears' weights as stored for inference
  };
  const int C = opts.quick ? 64 : 256, L = opts.quick ? 2 : 4, NH = opts.quick ? 2 : 8;
  // (the first three in their old order: the JSON's runs[0..2] keep their meaning)
  std::vector<Run> runs = {{"fp32", C, false, {}},
                           {"ternary", C, true, {}},
                           {"fp32, same bytes", C / 4, false, {}},
                           {"W1.58A8", C, true, {}, true}};
  const int steps = opts.quick ? 60 : opts.bitnet_steps;
  std::cout << "Part bitnet: BitNet b1.58 (ternary weights; and with int8 activations, W1.58A8; straight-through "
               "estimator) from scratch, " << steps
            << " steps each, lesson 10's recipe (" << L << " layers, context " << (opts.quick ? 64 : 128) << ").\n\n";
  for (Run& r : runs) {
    gpt::TrainOptions t;
    t.data = opts.data;
    t.n_layer = L, t.n_head = r.n_embd >= 64 ? NH : std::max(1, NH / 2), t.n_embd = r.n_embd;
    t.block_size = opts.quick ? 64 : 128;
    t.batch_size = 8, t.max_iters = steps, t.lr = 1e-3f, t.min_lr = 1e-4f, t.warmup_iters = std::max(1, steps / 10);
    t.eval_interval = std::max(1, steps / 4);
    t.eval_iters = opts.quick ? 5 : 20;
    t.seed = opts.seed;
    t.ternary = r.ternary && !r.a8;
    t.ternary_a8 = r.a8;  // implies ternary weights
    const char* dir = r.a8 ? "ternary-a8" : r.name == "fp32" ? "fp32" : r.ternary ? "ternary" : "fp32-small";
    t.out_dir = (fs::path(opts.bitnet_dir) / dir).string();
    t.overwrite = true;
    t.sample_tokens = 0;
    std::cout << "training " << r.name << " (C " << r.n_embd << ") into " << t.out_dir << "\n";
    std::ostringstream log;
    r.result = gpt::train(t, log);
    const double linear_weights = 12.0 * L * r.n_embd * static_cast<double>(r.n_embd);  // 3C^2 + C^2 + 4C^2 + 4C^2
    r.linear_bytes = linear_weights * (r.ternary ? 0.25 : 4.0);
    std::cout << "  " << fixed(r.result.seconds, 1) << " s, final val loss " << fixed(r.result.final_val_loss, 4) << "\n";
  }
  std::cout << "\n  " << std::left << std::setw(18) << "run" << std::right << std::setw(8) << "C" << std::setw(16)
            << "Linear bytes" << std::setw(12) << "val loss" << std::setw(12) << "train loss" << std::setw(10) << "s"
            << "\n";
  const int window = std::max(1, steps / 20);
  std::ostringstream js;
  js << "{\"steps\": " << steps << ", \"window\": " << window << ", \"runs\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    std::cout << "  " << std::left << std::setw(18) << r.name << std::right << std::setw(8) << r.n_embd << std::setw(16)
              << static_cast<long long>(r.linear_bytes) << std::setw(12) << fixed(r.result.final_val_loss, 4)
              << std::setw(12) << fixed(r.result.final_train_loss, 4) << std::setw(10) << fixed(r.result.seconds, 1)
              << "\n";
    js << (i ? ", " : "") << "{\"name\": \"" << r.name << "\", \"n_embd\": " << r.n_embd << ", \"ternary\": "
       << (r.ternary ? "true" : "false") << ", \"int8_activations\": " << (r.a8 ? "true" : "false")
       << ", \"linear_bytes\": " << jnum(r.linear_bytes)
       << ", \"val_loss\": " << jnum(r.result.final_val_loss) << ", \"train_loss\": " << jnum(r.result.final_train_loss)
       << ", \"seconds\": " << jnum(r.result.seconds) << ", \"curve\": [";
    const std::vector<float>& sl = r.result.step_losses;
    for (size_t s = 0; s + window <= sl.size(); s += window) {
      double m = 0.0;
      for (size_t k = s; k < s + window; ++k) m += sl[k];
      js << (s ? ", " : "") << jnum(m / window);
    }
    js << "]}";
  }
  js << "]}";
  const double gap_same_params = runs[1].result.final_val_loss - runs[0].result.final_val_loss;
  const double gap_same_bytes = runs[1].result.final_val_loss - runs[2].result.final_val_loss;
  std::cout << "\n  Ternary against fp32 at the same parameter count: " << (gap_same_params >= 0 ? "+" : "")
            << fixed(gap_same_params, 4) << " in val loss; against fp32 at the same bytes: "
            << (gap_same_bytes >= 0 ? "+" : "") << fixed(gap_same_bytes, 4) << " ("
            << (gap_same_bytes < 0 ? "ternary is better" : "ternary is not better") << " for its bytes).\n";
  const double gap_a8 = runs[3].result.final_val_loss - runs[1].result.final_val_loss;
  std::cout << "  Int8 activations on top of the ternary weights (W1.58A8 against W1.58A32): "
            << (gap_a8 >= 0 ? "+" : "") << fixed(gap_a8, 4) << " in val loss.\n";
  lessons::record_part("bitnet", js.str());
  return 0;
}

}  // namespace lesson15
