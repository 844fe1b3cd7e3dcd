// Lesson 04: the conv part (a filter on a hand-made image, stepped through), the bench part
// (the convolution ladder of kernels/conv.h, every rung validated against v1, then timed),
// the options and the part order.
// Training and evaluation live in train.cpp, the model in model.cpp.
#include "lessons/04-cnn/cnn.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "kernels/clock.h"
#include "kernels/conv.h"
#include "nn/check.h"
#include "nn/cli_checks.h"
#include "nn/conv.h"
#include "nn/rng.h"

namespace lesson04 {

namespace {

void print_map(const std::string& title, const float* m, int H, int W, int width = 5) {
  std::cout << title << "\n";
  for (int h = 0; h < H; ++h) {
    std::cout << "    ";
    for (int w = 0; w < W; ++w) std::cout << std::setw(width) << m[h * W + w];
    std::cout << "\n";
  }
}

}  // namespace

// ---- part "conv": one filter, stepped through ---------------------------------------------------
int run_conv_part(const Options& o) {
  std::cout << "== Part 1: a convolution on a hand-made image, loops vs im2col ==\n";
  // An 8x8 image: a bright square (1) on a dark background (0), its left edge at column 2.
  const int H = 8, W = 8;
  std::vector<float> image(H * W, 0.0f);
  for (int h = 2; h < 6; ++h) {
    for (int w = 2; w < 7; ++w) image[static_cast<size_t>(h * W + w)] = 1.0f;
  }
  // A 3x3 vertical-edge detector (Sobel): right column minus left column. It answers
  // "is it brighter to my right than to my left?" at every position, with ONE set of
  // 9 weights shared by all 64 positions.
  const std::vector<float> kernel = {-1, 0, 1,
                                     -2, 0, 2,
                                     -1, 0, 1};
  const float bias = 0.0f;
  const nn::Conv2dDims d{1, 1, H, W, 1, 3, 3, 1, 1};  // B, C, H, W, OC, KH, KW, stride, pad
  std::cout << std::fixed << std::setprecision(0);
  print_map("image (8x8):", image.data(), H, W);
  print_map("kernel (3x3, a vertical-edge detector):", kernel.data(), 3, 3);

  // 1. the plain loops: out[oh][ow] = sum_{kh,kw} image[oh-1+kh][ow-1+kw] * kernel[kh][kw]
  std::vector<float> out_loops(static_cast<size_t>(d.out_size()));
  nn::conv2d_forward_loops(out_loops.data(), image.data(), kernel.data(), &bias, d);
  std::cout << "output size: OH = (H + 2*pad - KH)/stride + 1 = (8 + 2 - 3)/1 + 1 = " << d.OH() << "\n";
  print_map("conv2d_forward_loops (pad 1): + where the square starts, - where it ends",
            out_loops.data(), d.OH(), d.OW());
  if (o.trace) {
    const int oh = 3, ow = 2;
    std::cout << "trace of out[" << oh << "][" << ow << "] (receptive field rows " << oh - 1 << ".."
              << oh + 1 << ", columns " << ow - 1 << ".." << ow + 1 << "):\n";
    std::cout << std::setprecision(1);
    float sum = bias;
    for (int kh = 0; kh < 3; ++kh) {
      for (int kw = 0; kw < 3; ++kw) {
        const int ih = oh - 1 + kh, iw = ow - 1 + kw;
        const float x = image[static_cast<size_t>(ih * W + iw)];
        const float k = kernel[static_cast<size_t>(kh * 3 + kw)];
        sum += x * k;
        std::cout << "    image[" << ih << "][" << iw << "] * kernel[" << kh << "][" << kw << "] = " << x
                  << " * " << k << "   sum = " << sum << "\n";
      }
    }
    std::cout << std::setprecision(0);
  }

  // 2. im2col: every receptive field becomes a column of a (C*KH*KW, OH*OW) = (9, 64) matrix;
  // the convolution is then ONE matrix product (1, 9) x (9, 64).
  std::vector<float> col(static_cast<size_t>(d.col_size()));
  std::vector<float> out_im2col(static_cast<size_t>(d.out_size())), work(out_im2col.size());
  nn::conv2d_forward_im2col(out_im2col.data(), image.data(), kernel.data(), &bias, col.data(),
                            work.data(), d);
  const int P = d.OH() * d.OW();
  std::cout << "im2col matrix: (C*KH*KW, OH*OW) = (9, " << P << "); columns 16..23 (output row 2):\n";
  for (int r = 0; r < 9; ++r) {
    std::cout << "    row " << r << " (kh " << r / 3 << ", kw " << r % 3 << "):";
    for (int p = 16; p < 24; ++p) std::cout << std::setw(3) << col[static_cast<size_t>(r * P + p)];
    std::cout << "\n";
  }
  float max_diff = 0.0f;
  for (size_t i = 0; i < out_loops.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(out_loops[i] - out_im2col[i]));
  }
  std::cout << std::setprecision(2) << "conv2d_forward_im2col (weight (1,9) x col (9,64)): max |loops - im2col| = "
            << max_diff << "\n";
  NN_CHECK(max_diff <= 1e-5f, "loops and im2col disagree by " << max_diff);
  std::cout << std::setprecision(0);

  // 3. ReLU, then 2x2 max-pooling: keep the strongest response in each 2x2 block.
  std::vector<float> act(out_loops.size());
  for (size_t i = 0; i < act.size(); ++i) act[i] = std::max(0.0f, out_loops[i]);
  std::vector<float> pooled(16);
  std::vector<int32_t> argmax(16);
  nn::maxpool2d_forward(pooled.data(), argmax.data(), act.data(), 1, 1, 8, 8, 2, 2);
  print_map("relu then maxpool 2x2 (4x4): the edge survives, at a quarter of the pixels",
            pooled.data(), 4, 4);
  std::cout << "argmax (index h*8+w of each winner, what the backward routes the gradient to):\n";
  for (int i = 0; i < 16; ++i) {
    std::cout << (i % 4 == 0 ? "    " : "") << std::setw(4) << argmax[static_cast<size_t>(i)] << (i % 4 == 3 ? "\n" : "");
  }

  // 4. backward: with dout = 1 everywhere (L = sum of outputs), dweight[kh][kw] is the sum
  // of the input pixels each kernel weight multiplied: a correlation of the input with dout.
  std::vector<float> dout(out_loops.size(), 1.0f);
  std::vector<float> dinp(image.size()), dweight(9, 0.0f);
  float dbias = 0.0f;
  nn::conv2d_backward_loops(dinp.data(), dweight.data(), &dbias, dout.data(), image.data(),
                            kernel.data(), d);
  print_map("backward with dout = 1: dweight (3x3) = sum of the pixels each weight saw",
            dweight.data(), 3, 3);
  std::cout << "dbias = sum of dout = " << dbias << " (one per output pixel)\n";
  print_map("dinp: how many times (times the weight) each pixel was used; interior = sum of kernel = 0",
            dinp.data(), H, W);

  // Counting parameters: the point of weight sharing.
  std::cout << "parameters: conv3x3 1->32 has 32*1*3*3 + 32 = 320; a dense layer producing the "
               "same 32x28x28 outputs from 28x28 inputs would have 784*25088 + 25088 = "
            << 784LL * 25088 + 25088 << "\n";
  std::cout.unsetf(std::ios::floatfield);
  std::cout << std::setprecision(6);
  return 0;
}

// ---- part "bench": naive loops vs im2col + sgemm ------------------------------------------------
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double median_seconds(F&& f, int repeats) {
  f();  // warm-up (allocations, caches, thread start)
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_s();
    f();
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// max |a - ref| / max |ref|: sums of thousands of float terms in another order differ by
// a few ulps of the largest partial sum, not of each element.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double worst = 0.0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(static_cast<double>(a[i]) - ref[i]);
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return worst / scale;
}

}  // namespace

int run_bench_part(const Options& o) {
  std::cout << "== Part 2: the convolution ladder (kernels/conv.h) on this lesson's conv layers ==\n";
  kernels::warn_if_busy(std::cout);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int B = o.bench_batch;
  struct Layer {
    const char* name;
    kernels::ConvShape s;
  };
  std::vector<Layer> layers;
  int c = 1, hw = 28;
  for (size_t l = 0; l < o.channels.size() && hw >= 2; ++l) {
    layers.push_back({l == 0 ? "conv1" : (l == 1 ? "conv2" : "conv3+"), {B, c, hw, hw, o.channels[l], 3, 3, 1, 1}});
    c = o.channels[l];
    hw /= 2;
  }
  const auto& versions = kernels::conv2d_versions();
  std::cout << "batch " << B << ", median of " << o.repeats << " runs after a warm-up, " << omp_get_max_threads()
            << " threads (v1, the loops, runs on one); forward with the fused ReLU\n";
  std::ostringstream json;
  json << "{\n  \"batch\": " << B << ",\n  \"threads\": " << omp_get_max_threads()
       << ",\n  \"repeats\": " << o.repeats << ",\n  \"layers\": [";
  std::cout << std::left << std::setw(8) << "layer" << std::setw(26) << "shape" << std::setw(10) << "pass";
  for (const kernels::ConvVersion& v : versions) std::cout << std::right << std::setw(16) << (v.id() + " ms (GF/s)");
  std::cout << "\n";
  bool first = true;
  for (const Layer& layer : layers) {
    const kernels::ConvShape& d = layer.s;
    nn::Rng rng(o.seed);
    std::vector<float> x(static_cast<size_t>(d.inp_size())), w(static_cast<size_t>(d.weight_size())),
        bias(static_cast<size_t>(d.OC)), g(static_cast<size_t>(d.out_size()));
    for (float& v : x) v = rng.normal();
    for (float& v : w) v = rng.normal(0.0f, 0.3f);
    for (float& v : bias) v = rng.normal();
    for (float& v : g) v = rng.normal();
    // 1. validate every rung against v1, the loops, forward and backward
    std::vector<float> out_ref(g.size()), dx_ref(x.size()), dw_ref(w.size(), 0.0f), db_ref(bias.size(), 0.0f);
    kernels::conv2d_forward_v1(out_ref.data(), x.data(), w.data(), bias.data(), d, true);
    kernels::conv2d_backward_v1(dx_ref.data(), dw_ref.data(), db_ref.data(), g.data(), x.data(), w.data(), d);
    std::vector<float> out(g.size()), dx(x.size()), dw(w.size()), db(bias.size());
    for (const kernels::ConvVersion& v : versions) {
      std::fill(dw.begin(), dw.end(), 0.0f);
      std::fill(db.begin(), db.end(), 0.0f);
      v.fn.forward(out.data(), x.data(), w.data(), bias.data(), d, true);
      v.fn.backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), d);
      const double err = std::max({max_rel_diff(out, out_ref), max_rel_diff(dx, dx_ref), max_rel_diff(dw, dw_ref),
                                   max_rel_diff(db, db_ref)});
      NN_CHECK(err < 1e-4, layer.name << ": conv2d " << v.id() << " disagrees with v1 (max relative error " << err
                                      << "): not timing an op that is wrong");
    }
    // 2. time every rung
    const double flops = 2.0 * static_cast<double>(d.out_size()) * d.C * d.KH * d.KW;  // multiply + add
    std::vector<double> fwd, bwd;
    for (const kernels::ConvVersion& v : versions) {
      fwd.push_back(median_seconds([&] { v.fn.forward(out.data(), x.data(), w.data(), bias.data(), d, true); },
                                   o.repeats));
      bwd.push_back(median_seconds(
          [&] { v.fn.backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), d); }, o.repeats));
    }
    std::ostringstream shape;
    shape << d.C << "x" << d.H << "x" << d.W << "->" << d.OC << "x" << d.OH() << "x" << d.OW();
    for (int pass = 0; pass < 2; ++pass) {
      const std::vector<double>& t = pass == 0 ? fwd : bwd;
      const double fl = pass == 0 ? flops : 2 * flops;  // the backward computes dweight and dinp
      const char* name = pass == 0 ? "forward" : "backward";
      std::cout << std::left << std::setw(8) << layer.name << std::setw(26) << shape.str() << std::setw(10) << name
                << std::right << std::fixed;
      for (double sec : t) {
        std::ostringstream cell;
        cell << std::fixed << std::setprecision(2) << 1e3 * sec << " (" << std::setprecision(1)
             << fl / sec * 1e-9 << ")";
        std::cout << std::setw(16) << cell.str();
      }
      std::cout << "\n";
      std::cout.unsetf(std::ios::floatfield);
      json << (first ? "" : ",") << "\n    {\"layer\": \"" << layer.name << "\", \"shape\": \"" << shape.str()
           << "\", \"pass\": \"" << name << "\", \"flops\": " << fl << ", \"seconds\": {";
      for (size_t i = 0; i < versions.size(); ++i) {
        json << (i ? ", " : "") << "\"" << versions[i].id() << "\": " << std::setprecision(6) << t[i];
      }
      // loops_s / im2col_s: v1 and v2 under the names the notebook (notebooks/make_04_cnn.py)
      // and older bench.json files use, with v2's column matrix and the input in bytes.
      json << "}, \"loops_s\": " << t[0] << ", \"im2col_s\": " << t[1]
           << ", \"col_bytes\": " << 4 * static_cast<int64_t>(d.C) * d.KH * d.KW * d.B * d.OH() * d.OW()
           << ", \"inp_bytes\": " << 4 * d.inp_size() << "}";
      first = false;
    }
  }
  json << "\n  ]\n}\n";
  std::filesystem::create_directories(o.out_dir);
  const std::string path = o.out_dir + "/bench.json";
  std::ofstream file(path);
  NN_CHECK(file.is_open(), "cannot write " << path);
  file << json.str();
  std::cout << "wrote     " << path << "\n";
  return 0;
}

// ---- options and part order ---------------------------------------------------------------------
void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run (all = conv, bench, train)")
      ->check(CLI::IsMember({"conv", "bench", "train", "eval", "speed", "grads", "all"}))
      ->capture_default_str();
  app.add_flag("--trace", o.trace, "conv: print every term of one output's sum");

  auto* g = "Training (part train, eval)";
  app.add_option("--dataset", o.dataset, "MNIST-format dataset to train on")
      ->check(CLI::IsMember({"fashion-mnist", "mnist"}))->capture_default_str()->group(g);
  app.add_option("--data-dir", o.data_dir,
                 "Directory with the IDX files (default: $NNLAB_DATA/<dataset>, data/<dataset>, "
                 "/usr/share/datasets/<dataset>)")->group(g);
  app.add_option("--channels", o.channels, "Output channels of each conv3x3-relu-maxpool block")
      ->check(CLI::Range(1, 1024))->capture_default_str()->group(g);
  app.add_option("--hidden", o.hidden, "Width of the fully connected layer")
      ->check(CLI::Range(1, 65536))->capture_default_str()->group(g);
  app.add_option("--dropout", o.dropout, "Dropout probability on the fully connected layer")
      ->check(nn::FiniteRange(0.0, 0.95))->capture_default_str()->group(g);
  app.add_option("--shift", o.shift, "Augmentation: shift training images by up to N pixels")
      ->check(CLI::Range(0, 8))->capture_default_str()->group(g);
  app.add_flag("--flip", o.flip, "Augmentation: flip training images left-right at random")->group(g);
  app.add_option("--epochs", o.epochs, "Passes over the training set")
      ->check(CLI::Range(1, 1000))->capture_default_str()->group(g);
  app.add_option("--batch-size", o.batch_size, "Images per step")
      ->check(CLI::Range(1, 4096))->capture_default_str()->group(g);
  app.add_option("--lr", o.lr, "Adam's peak learning rate")
      ->check(nn::FiniteRange(1e-7, 1.0))->capture_default_str()->group(g);
  app.add_option("--lr-min-frac", o.lr_min_frac, "Cosine decay ends at lr * this")
      ->check(nn::FiniteRange(0.0, 1.0))->capture_default_str()->group(g);
  app.add_option("--weight-decay", o.weight_decay, "L2 weight decay")
      ->check(nn::FiniteRange(0.0, 1.0))->capture_default_str()->group(g);
  app.add_option("--seed", o.seed, "Seed for initialisation, shuffling, dropout, augmentation")->check(nn::Seed())
      ->capture_default_str()->group(g);
  app.add_option("--threads", o.threads, "OpenMP threads (0 = OMP_NUM_THREADS or all cores)")
      ->check(nn::ThreadCount())->capture_default_str()->group(g);
  app.add_option("--limit-train", o.limit_train, "Use only the first N training images (0 = all)")
      ->check(nn::WholeNumber(0, std::numeric_limits<long long>::max()))->capture_default_str()->group(g);
  app.add_option("--limit-test", o.limit_test, "Use only the first N test images (0 = all)")
      ->check(nn::WholeNumber(0, std::numeric_limits<long long>::max()))->capture_default_str()->group(g);
  app.add_option("--out-dir", o.out_dir, "Where the log, checkpoint and notebook files go")
      ->capture_default_str()->group(g);
  app.add_option("--checkpoint", o.checkpoint, "eval: the checkpoint to load (default <out-dir>/cnn.safetensors)")
      ->group(g);

  auto* b = "Benchmark (part bench)";
  app.add_option("--bench-batch", o.bench_batch, "Images per timed convolution")
      ->check(CLI::Range(1, 1024))->capture_default_str()->group(b);
  app.add_option("--repeats", o.repeats, "Timed runs per variant (the median is reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str()->group(b);
  app.add_option("--speed-steps", o.speed_steps, "speed: training steps and inference batches per timed round")
      ->check(CLI::Range(1, 100000))->capture_default_str()->group(b);
}

int run(const Options& o) {
  if (o.part == "conv") return run_conv_part(o);
  if (o.part == "bench") return run_bench_part(o);
  if (o.part == "train") return run_train_part(o);
  if (o.part == "eval") return run_eval_part(o);
  if (o.part == "speed") return run_speed_part(o);
  if (o.part == "grads") return run_grads_part(o);
  for (auto* part : {&run_conv_part, &run_bench_part, &run_train_part}) {
    const int status = part(o);
    if (status != 0) return status;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lesson04
