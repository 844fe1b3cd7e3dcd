// gpt/bench.cpp: the GPT training step, timed (gpt/bench.h).
#include "gpt/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include "gpt/profile.h"
#include "kernels/clock.h"
#include "kernels/cuda/ceilings.h"  // emulator_warning
#include "kernels/harness.h"
#include "nn/check.h"
#include "io/progress.h"
#include "io/repo_paths.h"
#include "nn/rng.h"

// The one place the interpreter cmake/torch_python.cmake found is read (a compile definition
// of nnlab_gpt, gpt/CMakeLists.txt); a build without it has no PyTorch reference. It is a
// system program, not a path into the tree, so compiling it in does not tie the build to
// where the source was.
#ifndef NNLAB_TORCH_PYTHON
#define NNLAB_TORCH_PYTHON ""
#endif

namespace gpt {

// $NNLAB_TORCH_PYTHON, when set, overrides it at run time: a build copied to a GPU machine
// whose PyTorch lives elsewhere (scripts/gpu_gpt.sh's TORCH_PYTHON) runs that peer.
std::string torch_python() {
  const char* env = std::getenv("NNLAB_TORCH_PYTHON");
  return env != nullptr && *env != '\0' ? env : NNLAB_TORCH_PYTHON;
}
// Looked up at run time in the tree this program runs from (io/repo_paths.h): a moved or
// copied tree runs its own script, the one that matches its C++ model.
std::string torch_script() { return nn::find_in_repo("scripts/gpt_torch.py"); }
std::string llama_torch_script() { return nn::find_in_repo("scripts/llama_torch.py"); }

namespace fs = std::filesystem;

double time_train_step(const TrainOptions& o, const std::string& backend, int iters, int warmup) {
  auto be = make_backend(backend, o.precision);
  return time_train_step(o, *be, iters, warmup);
}

double time_train_step(const TrainOptions& o, Backend& b, int iters, int warmup) {
  Backend* be = &b;
  const GPTConfig c = config_from(o, 65);
  const int B = o.batch_size, T = o.block_size;
  be->check_capacity(c, B, T);
  GPT model = gpt_create(c, be->memory());
  gpt_init_weights(model, o.seed);
  nn::Rng rng(o.seed);
  std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
  StepOptions so;  // the trainer's step (gpt/model.h): default AdamW, the options' lr and clip
  so.lr = o.lr;
  so.grad_clip = o.grad_clip;
  std::vector<double> ms;
  for (int i = 0; i < warmup + iters; ++i) {
    for (size_t k = 0; k < x.size(); ++k) {
      x[k] = static_cast<int32_t>(rng.below(65));
      y[k] = static_cast<int32_t>(rng.below(65));
    }
    const auto t0 = std::chrono::steady_clock::now();
    train_step(model, *be, {{x.data(), y.data(), static_cast<uint64_t>(i)}}, B, T, so);
    be->synchronize();  // a GPU runs the last kernels after the host has moved on
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// ---- `nnlab gpt bench`: our backends and PyTorch, same model, same run --------------------

namespace {

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
}

// The number after "key": in a JSON text, searching from `from` (enough for the flat JSON
// scripts/gpt_torch.py writes); NaN when absent.
double json_number(const std::string& json, const std::string& key, size_t from = 0) {
  const size_t k = json.find("\"" + key + "\"", from);
  if (k == std::string::npos) return std::nan("");
  const size_t colon = json.find(':', k);
  try {
    return std::stod(json.substr(colon + 1));
  } catch (const std::exception&) {
    return std::nan("");
  }
}

std::string json_string(const std::string& json, const std::string& key) {
  const size_t k = json.find("\"" + key + "\"");
  if (k == std::string::npos) return "";
  const size_t q1 = json.find('"', json.find(':', k) + 1);
  const size_t q2 = json.find('"', q1 + 1);
  return q1 == std::string::npos || q2 == std::string::npos ? "" : json.substr(q1 + 1, q2 - q1 - 1);
}

// Runs scripts/gpt_torch.py with `args`; its JSON report ("" when PyTorch is missing or the
// script failed, with the reason in *why).
std::string run_torch(const std::string& args, std::string* why) {
  const std::string py = torch_python(), script = torch_script();
  if (py.empty()) {
    *why = "skipped: no Python with PyTorch was found when nnlab was configured (install python3-torch, re-run cmake)";
    return "";
  }
  if (script.empty()) {
    *why = "skipped: scripts/gpt_torch.py not found: this nnlab (" + nn::this_executable() +
           ") is not inside a checkout of the repository, nor is the tree it was built from there any more; "
           "run the nnlab of a build inside the checkout (build/<preset>/bin/nnlab)";
    return "";
  }
  const std::string tmp = (fs::temp_directory_path() / ("nnlab_torch_bench_" + std::to_string(::getpid()) + ".json")).string();
  const std::string cmd = "'" + py + "' '" + script + "' " + args + " --json '" + tmp + "'";
  std::cout << "running PyTorch: " << cmd << "\n" << std::flush;
  const int raw = std::system(cmd.c_str());
  // std::system returns the wait status: the exit code is in its high byte (768 is exit 3).
  const int rc = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : raw;
  std::ifstream in(tmp);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(tmp);
  if (rc != 0 || ss.str().empty()) {
    *why = "failed: the PyTorch script exited with status " + std::to_string(rc);
    return "";
  }
  return ss.str();
}

}  // namespace

int run_bench(const TrainOptions& o, const BenchOptions& b) {
  const int threads = use_threads(o.threads);
  std::vector<std::string> specs = b.backends;
  if (b.naive && std::find(specs.begin(), specs.end(), "naive") == specs.end()) specs.push_back("naive");
  // --rounds's checks before anything is printed or timed
  NN_CHECK(b.rounds == 1 || (b.torch && o.arch == "gpt2"),
           "--rounds " << b.rounds << " alternates ours with the PyTorch peer, and this run has none ("
                       << (b.torch ? "--arch " + o.arch + " has no timed peer" : "--no-torch")
                       << "): use --rounds 1");
  for (const std::string& spec : specs) {
    NN_CHECK(b.rounds == 1 || spec.substr(0, spec.find(':')) != "cuda",
             "--rounds " << b.rounds << ": alternating rounds are for the CPU peer; on a GPU time cuda with --rounds 1");
  }
  const GPTConfig cfg = config_from(o, 65);
  const double flops_tok = flops_per_token(cfg, o.block_size);
  const double tokens = static_cast<double>(o.batch_size) * o.block_size;
  std::cout << "GPT training step (forward, backward, clip, AdamW): " << o.n_layer << " layers, " << o.n_head
            << " heads, " << o.n_embd << " wide, context " << o.block_size << ", batch " << o.batch_size
            << ", vocabulary 65, dropout " << o.dropout << (o.bias ? "" : ", no biases") << "; " << threads
            << " CPU threads; median of " << b.iters << " after " << b.warmup << " warm-up; FLOPs/token "
            << nn::format_si(flops_tok) << "FLOP (6N + 12 L H Q T)\n";
  if (b.rounds > 1) std::cout << b.rounds << " alternating rounds: ours, then PyTorch at each thread setting\n";
  kernels::warn_if_busy(std::cout);

  struct Row {
    std::string name, precision;
    double ms = 0, peak = 0;  // peak: FLOP/s MFU is measured against (0: none)
    std::string note;
  };
  std::vector<Row> rows;
  std::map<std::string, double> peak_of;         // precision -> the peak measured for it
  std::map<std::string, std::string> peak_what;  // precision -> what that peak is
  struct BackendProfile {
    std::string backend;
    std::vector<ProfileRow> rows;  // totals over `steps`
    int steps = 1;
  };
  std::vector<BackendProfile> profiles;
  std::vector<std::string> cuda_precisions;
  struct Timed {  // one of our backends, kept for the later rounds
    std::unique_ptr<Backend> be;
    TrainOptions oo;
    size_t row;
    int iters, warmup;
    std::vector<double> ms;  // one median per round
  };
  std::vector<Timed> ours;
  for (const std::string& spec : specs) {
    const auto colon = spec.find(':');
    const std::string name = spec.substr(0, colon);
    TrainOptions oo = o;
    if (colon != std::string::npos) oo.precision = spec.substr(colon + 1);
    auto be = make_backend(name, oo.precision);
    const std::string precision = be->precision();
    if (name == "cuda") cuda_precisions.push_back(precision);
    // The peak is measured before AND after the steps and the larger kept: on a shared or
    // virtual machine one short measurement can land while the cores are taken, and a
    // low peak would print an MFU that is too high (above 100% has been seen).
    std::string what;
    const double peak_before = be->measure_peak_flops(threads, &what);
    const int iters = name == "naive" ? std::max(3, b.iters / 10) : b.iters;
    const double ms = time_train_step(oo, *be, iters, name == "naive" ? 1 : b.warmup);
    const double peak = peak_before > 0 ? std::max(peak_before, be->measure_peak_flops(threads, nullptr)) : 0.0;
    if (peak > 0) {
      peak_of[name == "cuda" ? precision : "cpu"] = peak;
      peak_what[name == "cuda" ? precision : "cpu"] = what;
      what += " (the better of two measurements, before and after the steps)";
    }
    rows.push_back({"nnlab " + be->name(), precision, ms, peak, "peak: " + (what.empty() ? "-" : what)});
    if (b.profile) {
      Profile prof;
      Backend timed = profiled(*be, prof);
      time_train_step(oo, timed, 1, 0);  // first launches, allocations
      prof.reset();
      const int steps = name == "naive" ? 1 : 5;
      time_train_step(oo, timed, steps, 0);
      profiles.push_back({be->name(), prof.rows(), steps});
    }
    ours.push_back({std::move(be), oo, rows.size() - 1, iters, name == "naive" ? 1 : b.warmup, {ms}});
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  struct PeerRound {
    double ms;
    std::string setting;
  };
  std::vector<PeerRound> peer_rounds;  // the CPU peer's best of each round

  // PyTorch, in the same run: on the GPU (eager / torch.compile at each of our cuda
  // precisions) when we timed cuda, else on the CPU (the fastest thread setting)
  std::map<std::string, double> torch_ms;  // "eager fp32" -> ms
  std::string torch_note;
  if (b.torch && o.arch != "gpt2") {
    // scripts/gpt_torch.py builds nanoGPT's (gpt2) model only: timing it against a llama
    // would compare two different models
    torch_note = "skipped: the PyTorch peer of the bench is nanoGPT's gpt2 model; --arch " + o.arch +
                 " has no timed peer here (scripts/llama_torch.py is its parity reference)";
  } else if (b.torch) {
    std::ostringstream args;
    args << " --n-layer " << o.n_layer << " --n-head " << o.n_head << " --n-embd " << o.n_embd << " --block-size "
         << o.block_size << " --batch-size " << o.batch_size << " --vocab-size 65 --iters " << b.iters << " --warmup "
         << b.warmup;
    if (!cuda_precisions.empty()) {
      std::string precs;
      for (const auto& p : cuda_precisions) precs += (precs.empty() ? "" : ",") + p;
      const std::string json = run_torch("bench-gpu" + args.str() + " --dropout " + std::to_string(o.dropout) +
                                             " --bias " + (o.bias ? "1" : "0") + " --precisions " + precs +
                                             " --modes '" + b.torch_modes + "'",
                                         &torch_note);
      // rows: {"precision": "bf16", "mode": "eager", "ms_per_iter": ...}
      for (size_t at = json.find("\"precision\""); at != std::string::npos; at = json.find("\"precision\"", at + 1)) {
        const std::string rest = json.substr(at);
        const std::string p = json_string(rest, "precision"), m = json_string(rest, "mode");
        const double ms = json_number(rest, "ms_per_iter");
        if (p.empty() || m.empty() || std::isnan(ms)) continue;
        torch_ms[m + " " + p] = ms;
        rows.push_back({"PyTorch " + m + " (" + json_string(json, "device") + ")", p, ms, 0,
                        "torch " + json_string(json, "torch_version") + (m == "compile" ? ", torch.compile" : "")});
      }
    } else {
      // round 0 timed ours above; each later round times ours again first, so the two sides
      // alternate: ours, peer, ours, peer, ...
      // A peer that fails in a later round leaves the rounds before it: they are reported
      // (ours' time of the failed round has no pair and is dropped), and the notes say so.
      std::string json;  // the last round's that succeeded
      for (int round = 0; round < b.rounds; ++round) {
        if (round > 0) {
          std::cout << "round " << round + 1 << " of " << b.rounds << "\n" << std::flush;
          for (Timed& t : ours) t.ms.push_back(time_train_step(t.oo, *t.be, t.iters, t.warmup));
        }
        std::string why;
        const std::string got = run_torch("bench" + args.str() + " --settings '" + b.torch_settings + "'", &why);
        if (got.empty()) {
          torch_note = round == 0 ? why
                                  : "failed in round " + std::to_string(round + 1) + " of " +
                                        std::to_string(b.rounds) + " (" + why + "); only the " +
                                        std::to_string(round) + " complete rounds before it are reported";
          if (round > 0) std::cout << "PyTorch: " << torch_note << "\n";
          break;
        }
        json = got;
        const size_t best = json.find("\"best\"");
        peer_rounds.push_back({json_number(json, "ms_per_iter", best),
                               "intra=" + fixed(json_number(json, "intra", best), 0) +
                                   ",blas=" + fixed(json_number(json, "blas_threads", best), 0)});
      }
      const int done = static_cast<int>(peer_rounds.size());
      if (done > 0) {
        for (Timed& t : ours) t.ms.resize(peer_rounds.size());  // pairs only
      }
      if (!json.empty()) {
        const size_t best = json.find("\"best\"");
        std::vector<double> peer_ms;
        for (const PeerRound& r : peer_rounds) peer_ms.push_back(r.ms);
        const double ms = median(peer_ms);
        torch_ms["eager fp32"] = ms;
        rows.push_back({"PyTorch eager (CPU)", "fp32", ms, 0,
                        "torch " + json_string(json, "torch_version") + ", BLAS " + json_string(json, "blas") +
                            (b.rounds == 1 ? ", intra-op threads " + fixed(json_number(json, "intra", best), 0) +
                                                 ", BLAS threads " + fixed(json_number(json, "blas_threads", best), 0) +
                                                 " (the fastest setting tried)"
                                           : ", the fastest setting of each round (rounds below), median of " +
                                                 std::to_string(done) + " rounds" +
                                                 (done < b.rounds ? " (of " + std::to_string(b.rounds) +
                                                                        " asked: it failed in the next)"
                                                                  : ""))});
        for (Timed& t : ours) {
          rows[t.row].ms = median(t.ms);
          if (b.rounds > 1) rows[t.row].note += "; median of " + std::to_string(done) + " rounds";
        }
      }
    }
  }
  for (Row& r : rows) {  // PyTorch's MFU against the peak we measured at that precision
    if (r.peak == 0) {
      const auto it = peak_of.find(cuda_precisions.empty() ? "cpu" : r.precision);
      if (it != peak_of.end()) r.peak = it->second;
    }
  }

  std::ostringstream table;
  table << "| implementation | precision | ms/step | tokens/s | MFU | vs PyTorch eager | vs torch.compile | note |\n"
        << "|---|---|---:|---:|---:|---:|---:|---|\n";
  auto ratio = [&](const std::string& key, double ms) {
    const auto it = torch_ms.find(key);
    return it == torch_ms.end() ? std::string("-") : fixed(it->second / ms, 2) + "x";
  };
  for (const Row& r : rows) {
    const double tok_s = tokens / (r.ms / 1e3);
    table << "| " << r.name << " | " << r.precision << " | " << fixed(r.ms, 2) << " | " << fixed(tok_s, 0) << " | "
          << (r.peak > 0 ? fixed(100.0 * tok_s * flops_tok / r.peak, 1) + "%" : "-") << " | "
          << ratio("eager " + r.precision, r.ms) << " | " << ratio("compile " + r.precision, r.ms) << " | " << r.note
          << " |\n";
  }
  std::cout << "\n" << table.str();
  for (const Row& r : rows) {
    if (r.peak > 0 && tokens / (r.ms / 1e3) * flops_tok > r.peak) {
      std::cout << "warning: " << r.name << "'s MFU is above 100%: it ran faster than the peak it is measured "
                << "against (" << peak_what[cuda_precisions.empty() ? "cpu" : r.precision] << "). Either that peak is not the machine's (a GPU's tensor-core "
                << "peak measured with our own matmul where no faster library was installed), or the "
                << "measurement was disturbed (another process, a virtual machine's core taken away): its MFU "
                << "is not to be trusted\n";
    }
  }
  for (const Row& r : rows) {
    if (r.name.find("emulator") != std::string::npos) {
      std::cout << kernels::cuda::emulator_warning() << "\n";
      break;
    }
  }
  if (b.torch && torch_ms.empty()) std::cout << "PyTorch: " << torch_note << "\n";
  for (const Row& r : rows) {
    if (r.name.rfind("nnlab", 0) != 0) continue;
    const auto eager = torch_ms.find("eager " + r.precision);
    if (eager == torch_ms.end()) continue;
    const bool gpu = r.name.rfind("nnlab cuda", 0) == 0;
    std::cout << r.name << " is " << fixed(eager->second / r.ms, 2) << "x PyTorch eager's speed"
              << (gpu ? " (goal: at least 1x)" : r.name == "nnlab cpu" ? " (goal: 2x)" : "");
    const auto comp = torch_ms.find("compile " + r.precision);
    if (comp != torch_ms.end()) std::cout << ", " << fixed(comp->second / r.ms, 2) << "x torch.compile's";
    std::cout << "\n";
  }
  std::ostringstream rounds_md;  // every round of an alternating run, and its ratios
  const int rounds_done = static_cast<int>(peer_rounds.size());  // < b.rounds: the peer failed in a later one
  if (b.rounds > 1 && rounds_done > 0) {
    for (const Timed& t : ours) {
      const std::string& name = rows[t.row].name;
      rounds_md << "\n" << name << " against PyTorch eager (CPU) in " << rounds_done
                << (rounds_done < b.rounds ? " (of " + std::to_string(b.rounds) + " asked: the peer failed in the next)"
                                           : "")
                << " alternating rounds (ms/step, each a median of " << t.iters << " steps; the peer's fastest thread setting of the round):\n\n"
                << "| round | " << name << " | PyTorch best | its setting | ratio |\n|---:|---:|---:|---|---:|\n";
      std::vector<double> ratios;
      for (int r = 0; r < rounds_done; ++r) {
        ratios.push_back(peer_rounds[r].ms / t.ms[r]);
        rounds_md << "| " << r + 1 << " | " << fixed(t.ms[r], 2) << " | " << fixed(peer_rounds[r].ms, 2) << " | "
                  << peer_rounds[r].setting << " | " << fixed(ratios.back(), 2) << "x |\n";
      }
      const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
      double fastest_peer = peer_rounds[0].ms;
      for (const PeerRound& p : peer_rounds) fastest_peer = std::min(fastest_peer, p.ms);
      const int at_2x = static_cast<int>(std::count_if(ratios.begin(), ratios.end(), [](double x) { return x >= 2.0; }));
      rounds_md << "\nmedian ratio of the rounds " << fixed(median(ratios), 2) << "x (lowest " << fixed(*lo, 2)
                << "x, highest " << fixed(*hi, 2) << "x); " << at_2x << " of " << rounds_done
                << " rounds at 2x or more; our median step against the peer's fastest round: "
                << fixed(fastest_peer / median(t.ms), 2) << "x\n";
    }
    std::cout << rounds_md.str();
  }
  std::ostringstream prof_md;
  for (const BackendProfile& p : profiles) {
    prof_md << "\nwhere a step goes on " << p.backend << " (each op waited for; mean of " << p.steps << " steps):\n\n";
    print_profile(prof_md, p.rows, p.steps);
  }
  std::cout << prof_md.str();

  if (!b.json.empty()) {
    std::ofstream js(b.json);
    NN_CHECK(js.good(), "cannot write " << b.json);
    js << "{\"schema\": \"nnlab-gpt-bench/2\", \"config\": {\"n_layer\": " << o.n_layer << ", \"n_head\": " << o.n_head
       << ", \"n_embd\": " << o.n_embd << ", \"block_size\": " << o.block_size << ", \"batch_size\": " << o.batch_size
       << ", \"dropout\": " << o.dropout << ", \"bias\": " << (o.bias ? "true" : "false") << "}, \"threads\": " << threads
       << ", \"flops_per_token\": " << flops_tok << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double tok_s = tokens / (r.ms / 1e3);
      js << (i ? ", " : "") << "{\"name\": " << kernels::harness::json_string(r.name) << ", \"precision\": \"" << r.precision
         << "\", \"ms_per_step\": " << r.ms << ", \"tokens_per_s\": " << tok_s << ", \"mfu\": "
         << (r.peak > 0 ? fixed(tok_s * flops_tok / r.peak, 5) : "null") << ", \"peak_flops\": " << r.peak << "}";
    }
    js << "], \"rounds\": [";
    for (size_t r = 0; r < peer_rounds.size(); ++r) {
      js << (r ? ", " : "") << "{\"round\": " << r + 1 << ", \"ours_ms_per_step\": {";
      for (size_t i = 0; i < ours.size(); ++i) {
        js << (i ? ", " : "") << kernels::harness::json_string(rows[ours[i].row].name) << ": "
           << ours[i].ms[r];  // each round times ours before the peer
      }
      js << "}, \"peer_best_ms_per_step\": " << peer_rounds[r].ms << ", \"peer_setting\": \"" << peer_rounds[r].setting
         << "\"}";
    }
    js << "], \"profiles\": [";
    for (size_t i = 0; i < profiles.size(); ++i) {
      const BackendProfile& pr = profiles[i];
      js << (i ? ", " : "") << "{\"backend\": " << kernels::harness::json_string(pr.backend) << ", \"ops\": [";
      for (size_t k = 0; k < pr.rows.size(); ++k) {
        const ProfileRow& p = pr.rows[k];
        js << (k ? ", " : "") << "{\"op\": \"" << p.op << "\", \"calls_per_step\": "
           << static_cast<double>(p.calls) / pr.steps << ", \"ms_per_step\": " << p.ms / pr.steps << "}";
      }
      js << "]}";
    }
    js << "]}\n";
    js.flush();
    NN_CHECK(js.good(), "writing " << b.json << " failed (is the disk full?): the JSON is incomplete");
  }
  if (!b.markdown.empty()) {
    std::ofstream md(b.markdown);
    NN_CHECK(md.good(), "cannot write " << b.markdown);
    md << "# nnlab gpt bench\n\nConfig: " << o.n_layer << " layers, " << o.n_head << " heads, " << o.n_embd
       << " wide, context " << o.block_size << ", batch " << o.batch_size << ", dropout " << o.dropout
       << (o.bias ? "" : ", no biases") << "; median of " << b.iters << " steps after " << b.warmup << " warm-up.\n\n"
       << table.str() << rounds_md.str() << prof_md.str();
    md.flush();
    NN_CHECK(md.good(), "writing " << b.markdown << " failed (is the disk full?): the table is incomplete");
  }
  return 0;
}

}  // namespace gpt
