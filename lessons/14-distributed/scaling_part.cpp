// Lesson 14's network parts: link (the all-reduce's latency and bandwidth, fitted), scaling
// (the trainer on 1 and 2 ranks) and predict (the fitted model extrapolated to clusters).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt/model.h"
#include "gpt/plan.h"
#include "gpt/train.h"
#include "kernels/harness.h"
#include "lessons/14-distributed/distributed_lesson.h"
#include "nn/check.h"

namespace lesson14 {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using kernels::harness::median_of;

json read_json(const std::string& path) {
  std::ifstream f(path);
  NN_CHECK(f, "cannot read " << path);
  json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    NN_CHECK(false, path << " is not valid JSON: " << e.what());
  }
  return j;
}

// Why a multi-rank part cannot run here, or "" when it can.
std::string mpi_missing(const std::string& program) {
  if (mpirun_path().empty()) {
    return "Open MPI's mpirun is not installed (sudo apt-get install openmpi-bin libopenmpi-dev, or bash "
           "scripts/setup.sh, then rebuild)";
  }
  if (sibling_program(program).empty()) {
    return program + " is not built beside this program (a build with MPI found makes it: cmake --preset release "
                     "after installing Open MPI)";
  }
  return "";
}

struct LinkResult {
  std::string transport;
  gpt::plan::LinkFit fit;
  std::vector<double> bytes, ring_ms, library_ms, model_ms;
};

}  // namespace

int run_link_part(const Options& opts) {
  std::cout << "== link: the all-reduce between 2 ranks, timed and fitted\n";
  const std::string why = mpi_missing("nnlab_mpi_check");
  if (!why.empty()) {
    std::cout << "skipped: " << why << "\n";
    lessons::record_part("link", "{\"skipped\": " + kernels::harness::json_string(why) + "}");
    return 0;
  }
  fs::create_directories(opts.out_dir);
  std::vector<LinkResult> results;
  // vader: shared memory between processes of one machine; tcp: the same bytes through the
  // kernel's TCP stack over loopback, what two machines on Ethernet would also pay per message;
  // tcp-limited: tcp in a network namespace of its own whose loopback a token bucket (tc tbf)
  // holds to --slow-link-gbit, a slow link made on purpose (needs root and iproute2: skipped,
  // and said so, otherwise). Both ranks send through that one loopback at once: each gets half.
  struct Transport {
    std::string name, btl, wrap;
  };
  std::vector<Transport> transports = {{"vader", "vader", ""}, {"tcp", "tcp", ""}};
  const std::string ns = "nnlab14-" + std::to_string(::getpid());
  const bool can_limit = opts.slow_link_gbit > 0 && !opts.quick && ::geteuid() == 0 && fs::exists("/usr/sbin/ip") &&
                         fs::exists("/usr/sbin/tc");
  if (can_limit) {
    const std::string setup = "ip netns add " + ns + " && ip netns exec " + ns + " ip link set lo up mtu 9000 && ip netns exec " + ns +
                              " tc qdisc add dev lo root tbf rate " + jnum(opts.slow_link_gbit) + "gbit burst 256kb latency 100ms";
    // (an Ethernet-like MTU: the bucket must hold a whole packet, and loopback's own is 64 KiB)
    const std::string log = (fs::path(opts.out_dir) / "link-netns.txt").string();
    if (run_command(setup, log) == 0) {
      transports.push_back({"tcp-limited", "tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo",
                            "ip netns exec " + ns + " "});  // (Open MPI leaves loopback out unless told)
    } else {
      std::cout << "(no rate-limited link: `" << setup << "` failed, see " << log << ")\n";
      run_command("ip netns del " + ns, log);
    }
  } else if (opts.slow_link_gbit > 0 && !opts.quick) {
    std::cout << "(no rate-limited link: it needs root, ip and tc (iproute2))\n";
  }
  for (const Transport& tr : transports) {
    const std::string& transport = tr.name;
    const std::string out = (fs::path(opts.out_dir) / ("link-" + transport + ".json")).string();
    const std::string log = (fs::path(opts.out_dir) / ("link-" + transport + ".txt")).string();
    const std::string cmd = tr.wrap + mpirun_path() + " -np 2 --mca btl self," + tr.btl +
                            (tr.btl == "vader" ? " --mca btl_vader_single_copy_mechanism none" : "") + " " +
                            sibling_program("nnlab_mpi_check") + (opts.quick ? " --quick" : "") + " --json " + out;
    const int status = run_command(cmd, log);
    if (!tr.wrap.empty()) {
      run_command("ip netns del " + ns, log + ".del");
      if (status != 0) {  // a sandbox that allows the namespace but not the sockets in it
        std::cout << "(no rate-limited link: `" << cmd << "` failed, status " << status << ", see " << log << ")\n";
        continue;
      }
    }
    NN_CHECK(status == 0, "link: `" << cmd << "` failed (status " << status << "); its output is in " << log);
    const json j = read_json(out);
    LinkResult r;
    r.transport = transport;
    std::vector<gpt::plan::LinkSample> samples;
    for (const json& s : j.at("sizes")) {
      r.bytes.push_back(s.at("bytes").get<double>());
      r.ring_ms.push_back(s.at("ring_ms").get<double>());
      r.library_ms.push_back(s.at("library_ms").get<double>());
      samples.push_back({r.bytes.back(), r.ring_ms.back() / 1e3, 2});
    }
    r.fit = gpt::plan::fit_link(samples);
    for (double b : r.bytes) r.model_ms.push_back(1e3 * gpt::plan::ring_allreduce_seconds(b, 2, r.fit.bandwidth_Bps, std::max(0.0, r.fit.latency_s)));
    results.push_back(r);
  }
  std::ostringstream rec;
  rec << "{\"transports\": [";
  for (size_t t = 0; t < results.size(); ++t) {
    const LinkResult& r = results[t];
    std::printf("\n%s: latency %.2f us per ring step, bandwidth %.2f GB/s (fit of the ring's times, R^2 %.4f)\n",
                r.transport.c_str(), r.fit.latency_s * 1e6, r.fit.bandwidth_Bps / 1e9, r.fit.r2);
    std::printf("%12s %12s %12s %12s %10s\n", "bytes", "ring ms", "MPI ms", "model ms", "model/ring");
    double worst = 0;
    for (size_t i = 0; i < r.bytes.size(); ++i) {
      std::printf("%12.0f %12.4f %12.4f %12.4f %10.2f\n", r.bytes[i], r.ring_ms[i], r.library_ms[i], r.model_ms[i],
                  r.model_ms[i] / r.ring_ms[i]);
      worst = std::max(worst, std::fabs(r.model_ms[i] / r.ring_ms[i] - 1.0));
    }
    std::printf("the model is within %.0f%% of every measured ring time\n", 100 * worst);
    // the bandwidth term alone: the largest message, where the latency no longer counts
    const double big_Bps = gpt::plan::ring_allreduce_traffic(r.bytes.back(), 2) / (r.ring_ms.back() / 1e3);
    std::printf("the largest message moves %.3f GB/s per rank (each rank's 2 (N-1)/N x bytes over the ring's time)\n",
                big_Bps / 1e9);
    if (r.transport == "tcp-limited") {
      std::printf("the bucket lets %.3g Gbit/s through loopback, shared by the 2 ranks sending at once: %.4f GB/s each; "
                  "the largest message got %.0f%% of it\n", opts.slow_link_gbit, opts.slow_link_gbit / 16,
                  100 * big_Bps / 1e9 / (opts.slow_link_gbit / 16));
    }
    rec << (t ? ", " : "") << "{\"transport\": \"" << r.transport << "\", \"latency_s\": " << jnum(r.fit.latency_s)
        << ", \"bandwidth_Bps\": " << jnum(r.fit.bandwidth_Bps) << ", \"r2\": " << jnum(r.fit.r2)
        << ", \"worst_relative_error\": " << jnum(worst) << ", \"largest_message_Bps\": "
        << jnum(gpt::plan::ring_allreduce_traffic(r.bytes.back(), 2) / (r.ring_ms.back() / 1e3))
        << (r.transport == "tcp-limited" ? ", \"limit_gbit\": " + jnum(opts.slow_link_gbit) : std::string()) << ", \"sizes\": [";
    for (size_t i = 0; i < r.bytes.size(); ++i) {
      rec << (i ? ", " : "") << "{\"bytes\": " << jnum(r.bytes[i]) << ", \"ring_ms\": " << jnum(r.ring_ms[i])
          << ", \"library_ms\": " << jnum(r.library_ms[i]) << ", \"model_ms\": " << jnum(r.model_ms[i]) << "}";
    }
    rec << "]}";
  }
  rec << "]}";
  shared().have_link = true;
  shared().latency_s = std::max(0.0, results[0].fit.latency_s);
  shared().bandwidth_Bps = results[0].fit.bandwidth_Bps;
  lessons::record_part("link", rec.str());
  return 0;
}

namespace {

struct RunConfig {
  std::string name;
  int ranks, threads;
  std::string extra;  // flags
};

struct RunStats {
  std::vector<double> tok_s, ms, wait_ms, comm_ms;  // medians of each repeat
};

}  // namespace

int run_scaling_part(const Options& opts) {
  std::cout << "\n== scaling: nnlab gpt train on 1 and 2 ranks (nanoGPT's CPU configuration)\n";
  const std::string nnlab = sibling_program("nnlab");
  NN_CHECK(!nnlab.empty(), "scaling: the nnlab program is not built beside this one");
  const std::string why = mpi_missing("nnlab");
  const bool mpi = why.empty();
  if (!mpi) std::cout << "the 2-rank runs are skipped: " << why << "\n";
  const int steps = opts.quick ? 14 : opts.steps, repeats = opts.quick ? 1 : opts.repeats;
  const std::vector<RunConfig> configs = {
      {"1 rank x 1 thread", 1, 1, ""},
      {"1 rank x 2 threads", 1, 2, ""},
      {"2 ranks x 1 thread, MPI_Allreduce", 2, 1, "--allreduce library"},
      {"2 ranks x 1 thread, ring", 2, 1, "--allreduce ring"},
      {"2 ranks x 1 thread, ZeRO-1", 2, 1, "--zero 1"},
  };
  std::map<std::string, RunStats> stats;
  const std::string base = " gpt train --max-iters " + std::to_string(steps) + " --eval-interval 100000 --eval-iters 1 " +
                           "--sample-tokens 0 --overwrite" + (opts.data.empty() ? "" : " --data '" + opts.data + "'");
  for (int rep = 0; rep < repeats; ++rep) {
    for (const RunConfig& c : configs) {
      if (c.ranks > 1 && !mpi) continue;
      const std::string dir = (fs::path(opts.out_dir) / ("scaling-" + std::to_string(c.ranks) + "x" + std::to_string(c.threads) +
                                                          (c.extra.empty() ? "" : "-" + c.extra.substr(c.extra.rfind(' ') + 1))))
                                  .string();
      const std::string cmd = (c.ranks > 1 ? mpirun_path() + " -np " + std::to_string(c.ranks) + " --bind-to core " : "") +
                              nnlab + base + " --threads " + std::to_string(c.threads) + " " + c.extra + " --out-dir " + dir;
      fs::create_directories(dir);
      const int status = run_command(cmd, dir + ".txt");
      NN_CHECK(status == 0, "scaling: `" << cmd << "` failed (status " << status << "); its output is in " << dir << ".txt");
      std::ifstream log(dir + "/log.jsonl");
      std::vector<double> tok, ms, wait, comm;
      std::string line;
      while (std::getline(log, line)) {
        const json r = json::parse(line);
        if (r.value("split", "") != "train" || r.at("step").get<int>() <= 10) continue;  // warm-up
        tok.push_back(r.at("tok_s").get<double>());
        ms.push_back(r.at("ms").get<double>());
        wait.push_back(r.value("wait_ms", 0.0));
        comm.push_back(r.value("comm_ms", 0.0));
      }
      NN_CHECK(!tok.empty(), "scaling: " << dir << "/log.jsonl has no timed steps");
      stats[c.name].tok_s.push_back(median_of(tok));
      stats[c.name].ms.push_back(median_of(ms));
      stats[c.name].wait_ms.push_back(median_of(wait));
      stats[c.name].comm_ms.push_back(median_of(comm));
    }
  }
  const gpt::TrainOptions to;  // the trainer's defaults: nanoGPT's CPU configuration
  gpt::GPTConfig cfg;
  cfg.n_layer = to.n_layer;
  cfg.n_head = to.n_head;
  cfg.n_embd = to.n_embd;
  cfg.block_size = to.block_size;
  cfg.vocab_size = 65;  // Tiny Shakespeare's characters (the fallback text has fewer: bytes within 1%)
  const double params = static_cast<double>(gpt::num_parameters(cfg));
  const double grad_bytes = 4.0 * params;
  const double sent = gpt::plan::ring_allreduce_traffic(grad_bytes, 2);
  std::printf("model: %.3fM parameters, %.2f MB of fp32 gradients all-reduced per step; each of 2 ranks sends %.2f MB "
              "(2 (N-1)/N of them)\n", params / 1e6, grad_bytes / 1e6, sent / 1e6);
  // a step = compute (forward, backward, AdamW) + waiting for the slower rank + the all-reduce
  std::printf("\n%-36s %10s %10s %11s %10s %10s\n", "configuration", "tok/s", "ms/step", "compute ms", "wait ms",
              "comm ms");
  std::ostringstream rec;
  rec << "{\"steps\": " << steps << ", \"repeats\": " << repeats << ", \"params\": " << jnum(params)
      << ", \"grad_bytes\": " << jnum(grad_bytes) << ", \"bytes_sent_per_rank\": " << jnum(sent) << ", \"runs\": [";
  bool first = true;
  std::map<std::string, double> tok, compute;
  for (const RunConfig& c : configs) {
    if (stats.count(c.name) == 0) continue;
    const RunStats& s = stats[c.name];
    const double t = median_of(s.tok_s), ms = median_of(s.ms), wt = median_of(s.wait_ms), cm = median_of(s.comm_ms);
    tok[c.name] = t;
    compute[c.name] = ms - wt - cm;
    std::printf("%-36s %10.0f %10.2f %11.2f %10.3f %10.3f\n", c.name.c_str(), t, ms, ms - wt - cm, wt, cm);
    rec << (first ? "" : ", ") << "{\"name\": " << kernels::harness::json_string(c.name) << ", \"ranks\": " << c.ranks
        << ", \"threads\": " << c.threads << ", \"tok_s\": " << jnum(t) << ", \"ms\": " << jnum(ms)
        << ", \"wait_ms\": " << jnum(wt) << ", \"comm_ms\": " << jnum(cm) << ", \"tok_s_each_repeat\": [";
    for (size_t i = 0; i < s.tok_s.size(); ++i) rec << (i ? ", " : "") << jnum(s.tok_s[i]);
    rec << "]}";
    first = false;
  }
  rec << "]";
  shared().have_scaling = true;
  shared().cpu_step_s = median_of(stats["1 rank x 1 thread"].ms) / 1e3;
  shared().cpu_grad_bytes = grad_bytes;
  shared().cpu_flops_per_step = gpt::flops_per_token(cfg, cfg.block_size) * to.batch_size * cfg.block_size;
  if (mpi) {
    const double two = tok["2 ranks x 1 thread, MPI_Allreduce"], one2 = tok["1 rank x 2 threads"], one1 = tok["1 rank x 1 thread"];
    const double eff = two / one2;
    std::printf("\n2 ranks x 1 thread reach %.0f%% of 1 rank x 2 threads' tokens/s (goal >= 85%%: %s) and %.0f%% of twice "
                "1 rank x 1 thread (the ideal)\n", 100 * eff, eff >= 0.85 ? "PASS" : "FAIL", 100 * two / (2 * one1));
    // where the rest goes: against the ideal (each rank as fast as one rank alone, no exchange)
    const std::string lib = "2 ranks x 1 thread, MPI_Allreduce";
    const double alone = compute["1 rank x 1 thread"], step2 = median_of(stats[lib].ms);
    std::printf("against the ideal, per step of %.2f ms: compute %.2f ms (1 rank alone: %.2f ms; +%.2f ms when two run "
                "at once: they share the memory system and the L3), waiting %.3f ms, all-reduce %.3f ms\n",
                step2, compute[lib], alone, compute[lib] - alone, median_of(stats[lib].wait_ms), median_of(stats[lib].comm_ms));
    rec << ", \"efficiency_vs_1x2\": " << jnum(eff) << ", \"efficiency_vs_ideal\": " << jnum(two / (2 * one1))
        << ", \"goal\": 0.85, \"goal_met\": " << (eff >= 0.85 ? "true" : "false");
    if (shared().have_link) {
      const double model_ms = 1e3 * gpt::plan::ring_allreduce_seconds(grad_bytes, 2, shared().bandwidth_Bps, shared().latency_s);
      const double ring_ms = median_of(stats["2 ranks x 1 thread, ring"].comm_ms);
      std::printf("the link model predicts %.3f ms for the ring all-reduce of the gradients; the trainer measured %.3f ms "
                  "in it (after the barrier: the transfer alone) = %.2fx the model\n", model_ms, ring_ms, ring_ms / model_ms);
      rec << ", \"ring_comm_model_ms\": " << jnum(model_ms) << ", \"ring_comm_measured_ms\": " << jnum(ring_ms);
    }
  }
  rec << "}";
  lessons::record_part("scaling", rec.str());
  return 0;
}

int run_predict_part(const Options& opts) {
  std::cout << "\n== predict: the model extrapolated to N ranks (no overlap of the all-reduce with the backward, as "
               "our trainer)\n";
  struct Case {
    std::string name;
    double compute_s, grad_bytes, flops, peak;
  };
  std::vector<Case> cases;
  if (fs::exists(opts.gpu_record)) {
    const json j = read_json(opts.gpu_record);
    const json& c = j.at("config");
    gpt::GPTConfig g;
    g.n_layer = c.at("n_layer");
    g.n_head = c.at("n_head");
    g.n_embd = c.at("n_embd");
    g.block_size = c.at("block_size");
    g.bias = c.value("bias", true);
    const double P = static_cast<double>(gpt::num_parameters(g));
    const double tokens = static_cast<double>(c.at("batch_size").get<int>()) * g.block_size;
    for (const json& r : j.at("rows")) {
      const std::string name = r.at("name");
      if (name.rfind("nnlab", 0) != 0 || r.at("precision") != "bf16") continue;
      cases.push_back({name + " (" + fs::path(opts.gpu_record).filename().string() + ")", r.at("ms_per_step").get<double>() / 1e3,
                       2.0 * P, j.at("flops_per_token").get<double>() * tokens, r.at("peak_flops").get<double>()});
    }
  } else {
    std::cout << "(no GPU record at " << opts.gpu_record << ": the GPU case is left out)\n";
  }
  if (shared().have_scaling) {
    cases.push_back({"nnlab cpu, 1 thread, measured by the scaling part", shared().cpu_step_s, shared().cpu_grad_bytes,
                     shared().cpu_flops_per_step, 0.0});
  }
  NN_CHECK(!cases.empty() || opts.quick, "predict: no step to extrapolate (run the scaling part, or give --gpu-record)");
  std::vector<gpt::plan::Link> links = gpt::plan::link_presets();
  if (shared().have_link) {
    gpt::plan::Link here;
    here.name = "here";
    here.description = "shared memory between 2 processes here, as fitted by the link part";
    here.advertised_Bps = shared().bandwidth_Bps / gpt::plan::kLinkEfficiency;  // the fit is already what it delivers
    here.latency_s = shared().latency_s;
    links.push_back(here);
  }
  const std::vector<int> ns = {1, 2, 8, 64, 512};
  std::ostringstream rec;
  rec << "{\"ranks\": [1, 2, 8, 64, 512], \"cases\": [";
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    std::printf("\n%s: %.1f ms compute, %.1f MB of gradients\n%-8s", c.name.c_str(), c.compute_s * 1e3, c.grad_bytes / 1e6, "link");
    for (int n : ns) std::printf(" %10s", ("N=" + std::to_string(n)).c_str());
    std::printf("   (speed-up over one rank)\n");
    rec << (ci ? ", " : "") << "{\"name\": " << kernels::harness::json_string(c.name) << ", \"compute_s\": " << jnum(c.compute_s)
        << ", \"grad_bytes\": " << jnum(c.grad_bytes) << ", \"links\": [";
    for (size_t li = 0; li < links.size(); ++li) {
      const gpt::plan::Link& L = links[li];
      std::printf("%-8s", L.name.c_str());
      rec << (li ? ", " : "") << "{\"link\": \"" << L.name << "\", \"bandwidth_Bps\": " << jnum(L.bandwidth_Bps())
          << ", \"latency_s\": " << jnum(L.latency_s) << ", \"speedup\": [";
      std::vector<double> mfu;
      for (size_t k = 0; k < ns.size(); ++k) {
        gpt::plan::StepInput in;
        in.compute_s = c.compute_s;
        in.grad_bytes = c.grad_bytes;
        in.ranks = ns[k];
        in.bandwidth_Bps = L.bandwidth_Bps();
        in.latency_s = L.latency_s;
        in.flops_per_rank = c.flops;
        in.peak_flops = c.peak;
        const gpt::plan::StepPrediction p = gpt::plan::predict_step(in);
        std::printf(" %10.1f", ns[k] * p.efficiency);
        rec << (k ? ", " : "") << jnum(ns[k] * p.efficiency);
        mfu.push_back(p.mfu);
      }
      rec << "]";
      if (c.peak > 0) {  // MFU: each rank's FLOPs over its peak, the step now longer by the all-reduce
        std::printf("   MFU %.1f%% -> %.1f%% at N=%d", 100 * mfu.front(), 100 * mfu.back(), ns.back());
        rec << ", \"mfu\": [";
        for (size_t k = 0; k < mfu.size(); ++k) rec << (k ? ", " : "") << jnum(mfu[k]);
        rec << "]";
      }
      std::printf("\n");
      rec << "}";
    }
    rec << "]}";
  }
  rec << "]}";
  lessons::record_part("predict", rec.str());
  return 0;
}

}  // namespace lesson14
