// gpt/plan_cli.cpp: `nnlab plan` (gpt/plan_cli.h). The flags, the model they describe, then
// the table, section by section in gpt/plan.h's order.
#include "gpt/plan_cli.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "gpt/cli.h"
#include "gpt/hf.h"
#include "gpt/model.h"
#include "gpt/plan.h"
#include "gpt/train.h"
#include "nn/check.h"
#include "nn/cli_checks.h"

namespace gpt {

namespace fs = std::filesystem;

// ---- the flags --------------------------------------------------------------------------------

void add_plan_options(CLI::App& app, PlanCliOptions& o) {
  const std::string m = "Model", h = "Hardware", n = "Network";
  app.add_option("--params", o.params, "Parameters, e.g. 7e9 (default: counted from the shape or --config)")
      ->check(nn::FiniteRange(1, 1e15))->group(m);
  app.add_option("--config", o.config, "Plan one of our configs: a train config (gpt/configs/*.toml) or a Hugging Face "
                                       "config.json (or its directory); printed beside memory_breakdown's exact count")
      ->check(CLI::ExistingPath)->group(m);
  app.add_option("--precision", o.precision, "fp32 (everything fp32, our trainer) or mixed (bf16 weights and grads, "
                                             "fp32 master and moments); auto: fp32 with --config, else mixed")
      ->check(CLI::IsMember({"auto", "fp32", "mixed"}))->capture_default_str()->group(m);
  app.add_option("--zero", o.zero, "ZeRO stage of the per-GPU column: 0 none, 1 optimizer state, 2 + grads, 3 + weights")
      ->check(CLI::Range(0, 3))->capture_default_str()->group(m);
  app.add_option("--arch", o.arch, "The block: gpt2 or llama")->check(CLI::IsMember({"gpt2", "llama"}))
      ->capture_default_str()->group(m);
  app.add_option("--layers", o.layers, "L, layers")->check(CLI::Range(1, 100000))->group(m);
  app.add_option("--embd", o.embd, "C, channels")->check(CLI::Range(1, 1000000))->group(m);
  app.add_option("--heads", o.heads, "NH, attention heads")->check(CLI::Range(1, 100000))->group(m);
  app.add_option("--kv-heads", o.kv_heads, "NKV, key/value heads (llama; default: --heads)")
      ->check(CLI::Range(1, 100000))->group(m);
  app.add_option("--ffn", o.ffn, "H, the SwiGLU width (llama; default 8C/3 rounded up to 32)")
      ->check(CLI::Range(1, 10000000))->group(m);
  app.add_option("--vocab", o.vocab, "V, vocabulary (default 50257, GPT-2's; 65 characters for a train config)")
      ->check(CLI::Range(1, 10000000))->group(m);
  app.add_option("--seq", o.seq, "T, tokens per sequence (default: the config's block size, else 2048)")
      ->check(CLI::Range(1, 10000000))->group(m);
  app.add_option("--batch", o.batch, "B, sequences per GPU per micro-step (default: the config's, else 8)")
      ->check(CLI::Range(1, 10000000))->group(m);
  app.add_option("--attention", o.attention, "What attention keeps: full (scores and maps, our naive trainer), "
                                             "maps (our cpu and cuda), flash (one number per row); auto: full with --config, "
                                             "else flash")
      ->check(CLI::IsMember({"auto", "full", "maps", "flash"}))->capture_default_str()->group(m);
  app.add_flag("--recompute", o.recompute, "Count activations with recomputation (block inputs + one layer) "
                                           "in the GPU counts")->group(m);
  app.add_option("--gpu-mem", o.gpu_mem_gb, "One GPU's memory in GB (1e9 bytes)")
      ->check(nn::FiniteRange(0.001, 1e6))->capture_default_str()->group(h);
  app.add_option("--usable", o.usable, "The fraction of a GPU's memory a run can use (default 0.9)")
      ->check(nn::FiniteRange(0.01, 1.0))->group(h);
  app.add_option("--serve-batch", o.serve_batch, "Sequences decoded at once (the KV cache's batch)")
      ->check(CLI::Range(1, 10000000))->capture_default_str()->group(h);
  app.add_option("--serve-seq", o.serve_seq, "Context the KV cache holds (default: --seq)")
      ->check(CLI::Range(1, 100000000))->group(h);
  app.add_option("--nodes", o.nodes, "Data-parallel ranks (one GPU each) the gradients are all-reduced over")
      ->check(CLI::Range(1, 10000000))->capture_default_str()->group(n);
  std::string links;
  for (const plan::Link& l : plan::link_presets()) links += (links.empty() ? "" : ", ") + l.name;
  std::vector<std::string> names;
  for (const plan::Link& l : plan::link_presets()) names.push_back(l.name);
  app.add_option("--link", o.link, "The link between ranks: " + links)->check(CLI::IsMember(names))
      ->capture_default_str()->group(n);
  app.add_option("--step-ms", o.step_ms, "One rank's compute per step alone, ms (measure it: nnlab gpt bench); "
                                         "predicts the step time on --nodes ranks")
      ->check(nn::FiniteRange(1e-6, 1e9))->group(n);
  app.add_flag("--overlap", o.overlap, "Assume the all-reduce overlaps the backward (our trainer's does not)")->group(n);
}

// ---- the model the flags describe ------------------------------------------------------------

namespace {

struct Model {
  bool have_shape = false;  // a GPTConfig to count activations with
  GPTConfig config;
  int B = 0, T = 0;
  double params = 0;        // what the state is counted for
  int64_t shape_params = 0; // the shape's own count (parameter_count)
  std::string source;       // where the shape came from
  bool ours = false;        // --config: compare with memory_breakdown
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  NN_CHECK(in.good(), "cannot read " << path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A train config (`n-layer = 6` lines, read as `nnlab gpt train --config` reads it), or a Hugging
// Face config.json (a .json file, or a directory holding one).
GPTConfig load_config(const std::string& path, int vocab, int* B, int* T, std::string* source) {
  fs::path p(path);
  if (fs::is_directory(p)) p /= "config.json";
  if (p.extension() == ".json") {
    const GPTConfig c = config_from_hf_json(read_text_file(p.string()), p.string());
    *source = p.string() + " (a Hugging Face config.json)";
    *B = 8;
    *T = c.block_size;
    return c;
  }
  CLI::App app("plan", "gpt train");
  TrainOptions t;
  add_train_flags(app, t);
  app.parse(std::string(), false);
  apply_config_file(app, p.string());
  const int V = vocab > 0 ? vocab : 65;  // the character vocabulary of Tiny Shakespeare, the default text
  *source = p.string() + " (a train config; vocabulary " + std::to_string(V) +
            (vocab > 0 ? ")" : ": Tiny Shakespeare's characters, --vocab to change)");
  *B = t.batch_size;
  *T = t.block_size;
  return config_from(t, V);
}

Model model_of(const PlanCliOptions& o) {
  Model m;
  const bool shape_flag = o.layers > 0 || o.embd > 0 || o.heads > 0;
  NN_CHECK(o.config.empty() || !shape_flag, "give --config or the shape (--layers --embd --heads), not both");
  if (!o.config.empty()) {
    m.config = load_config(o.config, o.vocab, &m.B, &m.T, &m.source);
    m.have_shape = true;
    m.ours = true;
  } else if (shape_flag) {
    NN_CHECK(o.layers > 0 && o.embd > 0 && o.heads > 0,
             "a shape needs all of --layers, --embd and --heads (given: layers " << o.layers << ", embd " << o.embd
                                                                               << ", heads " << o.heads << ")");
    GPTConfig& c = m.config;
    c.arch = parse_arch(o.arch);
    c.n_layer = o.layers;
    c.n_embd = o.embd;
    c.n_head = o.heads;
    c.n_kv_head = o.kv_heads;
    c.ffn_hidden = o.ffn;
    c.vocab_size = o.vocab > 0 ? o.vocab : 50257;
    c.bias = c.arch == Arch::gpt2;
    c.tie_embeddings = c.arch == Arch::gpt2;
    c.dropout = 0.0f;
    m.B = 8;
    m.T = 2048;
    m.have_shape = true;
    m.source = "the flags";
  } else {
    NN_CHECK(o.params > 0, "nothing to plan: give --params (e.g. 7e9), a shape (--layers --embd --heads), or --config");
  }
  if (o.seq > 0) m.T = o.seq;
  if (o.batch > 0) m.B = o.batch;
  if (m.have_shape) {
    GPTConfig& c = m.config;
    c.block_size = std::max(c.block_size, m.T);  // the context must hold T positions
    // the attention the plan counts (--config: as our trainer runs the config, unless told)
    if (o.attention == "flash" || (o.attention == "auto" && !m.ours)) c.attention = AttentionKind::flash;
    if (o.attention == "full" || o.attention == "maps") c.attention = AttentionKind::full;
    validate(c);
    m.shape_params = plan::parameter_count(c);
  }
  m.params = o.params > 0 ? o.params : static_cast<double>(m.shape_params);
  return m;
}

// ---- formatting -------------------------------------------------------------------------------

std::string bytes_str(double b) {
  char buf[32];
  if (b >= 1e12) {
    std::snprintf(buf, sizeof buf, "%.2f TB", b / 1e12);
  } else if (b >= 1e9) {
    std::snprintf(buf, sizeof buf, b >= 1e11 ? "%.0f GB" : b >= 1e10 ? "%.1f GB" : "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  } else if (b >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  }
  return buf;
}

std::string seconds_str(double s) {
  char buf[32];
  if (s >= 1.0) {
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  }
  return buf;
}

std::string num_str(double x, const char* f = "%.3g") {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string gpus_str(int64_t n) { return n == 0 ? "does not fit" : std::to_string(n); }

// A row: a label, then right-aligned columns.
void row(std::ostream& os, const std::string& label, std::initializer_list<std::string> cols, int w = 14) {
  os << "  " << std::left << std::setw(34) << label << std::right;
  for (const std::string& c : cols) os << std::setw(w) << c;
  os << "\n";
}

}  // namespace

// ---- the plan ---------------------------------------------------------------------------------

void print_plan(std::ostream& os, const PlanCliOptions& o) {
  NN_CHECK(std::isfinite(o.gpu_mem_gb) && o.gpu_mem_gb > 0, "--gpu-mem must be a finite number of GB > 0");
  NN_CHECK(o.usable == 0 || (std::isfinite(o.usable) && o.usable > 0 && o.usable <= 1), "--usable must be in (0, 1]");
  NN_CHECK(o.nodes >= 1 && o.serve_batch >= 1 && o.zero >= 0 && o.zero <= 3, "--nodes, --serve-batch >= 1; --zero 0..3");
  const Model m = model_of(o);
  const plan::Precision prec = plan::parse_precision(o.precision == "auto" ? (m.ours ? "fp32" : "mixed") : o.precision);
  const plan::Link& link = plan::find_link(o.link);
  const double usable_frac = o.usable > 0 ? o.usable : plan::kUsableFraction;
  const double gpu_bytes = o.gpu_mem_gb * 1e9, usable = gpu_bytes * usable_frac;
  const int N = o.nodes;

  // the model
  os << "nnlab plan (GB = 1e9 bytes; every figure per GPU unless it says otherwise)\n";
  os << "model: " << num_str(m.params, "%.4g") << " parameters";
  if (m.have_shape) {
    const GPTConfig& c = m.config;
    os << " (" << (o.params > 0 ? "given; the shape counts " + num_str(static_cast<double>(m.shape_params), "%.4g")
                                : "counted from the shape") << ")\n";
    os << "shape: " << arch_name(c.arch) << " block, L " << c.n_layer << ", C " << c.n_embd << ", NH " << c.n_head;
    if (kv_heads(c) != c.n_head) os << ", NKV " << kv_heads(c);
    os << ", H " << mlp_hidden(c) << ", V " << c.vocab_size << (c.bias ? ", biases" : "") << "; from " << m.source
       << "\n";
    os << "batch: B " << m.B << " sequences of T " << m.T << " tokens per GPU per micro-step\n";
  } else {
    os << "\n(no shape: give --layers --embd --heads [--seq --batch] to count activations and the KV cache)\n";
  }

  // 1. the state
  const plan::ParamBytes pb = plan::bytes_per_param(prec);
  const plan::StateBytes one = plan::state_bytes_per_rank(m.params, prec, 0, 1);
  const plan::StateBytes shard = plan::state_bytes_per_rank(m.params, prec, o.zero, N);
  os << "\ntraining state, precision " << plan::precision_name(prec)
     << (prec == plan::Precision::mixed ? " (bf16 weights and gradients, fp32 master weights and AdamW moments)\n"
                                        : " (weights, gradients, AdamW m and v all fp32)\n");
  const std::string per_rank = "ZeRO-" + std::to_string(o.zero) + ", N=" + std::to_string(N);
  row(os, "", {"bytes/param", "one GPU", per_rank}, 16);
  row(os, "weights", {num_str(pb.weights), bytes_str(one.weights), bytes_str(shard.weights)}, 16);
  row(os, "gradients", {num_str(pb.grads), bytes_str(one.grads), bytes_str(shard.grads)}, 16);
  const double opt_sharded = shard.optimizer;
  if (pb.master > 0) {
    const double f = pb.master / pb.optimizer();
    row(os, "master weights (fp32)", {num_str(pb.master), bytes_str(m.params * pb.master), bytes_str(opt_sharded * f)},
        16);
    row(os, "AdamW m and v (fp32)", {num_str(pb.moments), bytes_str(m.params * pb.moments),
                                     bytes_str(opt_sharded * (1 - f))}, 16);
  } else {
    row(os, "AdamW m and v (fp32)", {num_str(pb.moments), bytes_str(one.optimizer), bytes_str(shard.optimizer)}, 16);
  }
  row(os, "state", {num_str(pb.total()), bytes_str(one.total()), bytes_str(shard.total())}, 16);

  // 2. activations
  double other = 0.0;  // activations + scratch per rank, for the GPU counts
  plan::ActivationCount act;
  plan::AttentionStore store = plan::AttentionStore::flash;
  if (m.have_shape) {
    store = o.attention == "maps" ? plan::AttentionStore::maps
                                  : plan::attention_store_of(m.config, true);
    act = plan::count_activations(m.config, m.B, m.T, store, m.config.dropout > 0.0f);
    const double ab = plan::bytes_per_activation(prec);
    os << "\nactivations at B " << m.B << ", T " << m.T << " (" << (prec == plan::Precision::mixed ? "bf16" : "fp32")
       << ", attention keeps: " << plan::attention_store_name(store) << ")\n";
    row(os, "stored (every layer's)", {bytes_str(static_cast<double>(act.stored()) * ab)}, 16);
    row(os, "recomputed (block inputs + 1 layer)", {bytes_str(static_cast<double>(act.recomputed()) * ab)}, 16);
    row(os, "backward scratch (one layer's grads)", {bytes_str(static_cast<double>(act.scratch) * ab)}, 16);
    other = static_cast<double>((o.recompute ? act.recomputed() : act.stored()) + act.scratch) * ab;
    row(os, "per GPU, total", {bytes_str(shard.total() + other)}, 16);
    os << "  (" << per_rank << (shard.total() + other <= usable ? ": fits in " : ": does NOT fit in ") << bytes_str(usable)
       << " usable)\n";
  }

  // our trainer's own count, beside the formula: everything fp32
  if (m.ours) {
    const bool preatt = store == plan::AttentionStore::scores_and_maps;
    const MemoryBreakdown exact = memory_breakdown(m.config, m.B, m.T, preatt, false);
    const MemoryBreakdown exact_rc = memory_breakdown(m.config, m.B, m.T, preatt, true);
    const plan::ActivationCount a = act;
    const double P = static_cast<double>(plan::parameter_count(m.config));
    os << "\nour trainer at B " << m.B << ", T " << m.T << ": memory_breakdown (gpt/model.h, counted from the model's "
       << "tables) beside this plan's formula, fp32\n";
    row(os, "", {"exact", "formula"}, 16);
    row(os, "parameters", {bytes_str(static_cast<double>(exact.params)), bytes_str(P * 4)}, 16);
    row(os, "gradients", {bytes_str(static_cast<double>(exact.grads)), bytes_str(P * 4)}, 16);
    row(os, "AdamW m and v", {bytes_str(static_cast<double>(exact.adam)), bytes_str(P * 8)}, 16);
    row(os, "activations", {bytes_str(static_cast<double>(exact.activations)),
                            bytes_str(static_cast<double>(a.stored()) * 4)}, 16);
    row(os, "activations, recomputed", {bytes_str(static_cast<double>(exact_rc.activations)),
                                        bytes_str(static_cast<double>(a.recomputed()) * 4)}, 16);
    row(os, "backward scratch", {bytes_str(static_cast<double>(exact.scratch)), bytes_str(static_cast<double>(a.scratch) * 4)},
        16);
    const double formula_total = P * 16 + static_cast<double>(a.stored() + a.scratch) * 4;
    row(os, "total", {bytes_str(static_cast<double>(exact.total())), bytes_str(formula_total)}, 16);
    const bool same = exact.total() == static_cast<int64_t>(P) * 16 + (a.stored() + a.scratch) * 4 &&
                      exact_rc.activations == a.recomputed() * 4;
    os << "  " << (same ? "equal to the byte" : "they DIFFER: the formula misses a tensor the tables hold") << "\n";
  }

  // 4. GPUs to train
  os << "\nGPUs of " << num_str(o.gpu_mem_gb, "%g") << " GB (" << num_str(usable_frac * 100, "%g")
     << "% usable: " << bytes_str(usable) << ") to train, "
     << (m.have_shape ? std::string(o.recompute ? "recomputed" : "stored") + " activations included"
                      : "state only (no activations)")
     << "\n";
  const char* what[] = {"plain data parallel (all on each)", "ZeRO-1 (optimizer state / N)",
                        "ZeRO-2 (+ gradients / N)", "ZeRO-3 (+ weights / N)"};
  for (int s = 0; s <= 3; ++s) {
    const int64_t g = plan::gpus_to_train(m.params, prec, s, other, usable);
    std::string per = "-";
    if (g > 0) per = bytes_str(plan::state_bytes_per_rank(m.params, prec, s, static_cast<int>(std::min<int64_t>(g, 1 << 30))).total() + other);
    row(os, what[s], {gpus_str(g), g > 0 ? per + " each" : ""}, 16);
  }

  // 3. serving
  const int serve_T = o.serve_seq > 0 ? o.serve_seq : m.T;
  double kv_bf16 = 0.0;
  if (m.have_shape) {
    const GPTConfig& c = m.config;
    kv_bf16 = plan::kv_cache_bytes(c.n_layer, kv_heads(c), c.n_embd / c.n_head, serve_T, o.serve_batch, 2.0);
  }
  os << "\nto serve";
  if (m.have_shape) {
    os << " (KV cache in bf16 for " << o.serve_batch << " sequence(s) of " << serve_T << " tokens: " << bytes_str(kv_bf16)
       << ")";
  }
  os << "\n";
  row(os, "weights as", {"bytes/param", "weights", "GPUs"}, 16);
  const kernels::WeightFormat formats[] = {kernels::WeightFormat::f32, kernels::WeightFormat::bf16,
                                           kernels::WeightFormat::int8, kernels::WeightFormat::int4};
  for (kernels::WeightFormat f : formats) {
    const double bpp = plan::serving_bytes_per_param(f, m.have_shape ? m.config.n_embd : 0);
    const double w = m.params * bpp;
    row(os, std::string("  ") + kernels::format_name(f), {num_str(bpp, "%.4g"), bytes_str(w),
                                                          std::to_string(plan::gpus_to_serve(w, kv_bf16, usable))}, 16);
  }

  // 5. the network
  os << "\nnetwork: " << link.name << ", " << link.description << ": " << bytes_str(link.advertised_Bps)
     << "/s advertised, planned at " << num_str(plan::kLinkEfficiency * 100, "%g") << "% = "
     << bytes_str(link.bandwidth_Bps()) << "/s; latency " << seconds_str(link.latency_s) << " a ring step ("
     << link.latency_source << ")\n";
  const double grad_bytes = m.params * pb.grads;
  if (N == 1) {
    os << "  one rank: nothing to all-reduce (give --nodes N to plan N ranks)\n";
    return;
  }
  const double t_comm = plan::step_comm_seconds(grad_bytes, N, o.zero, link.bandwidth_Bps(), link.latency_s);
  os << "  ZeRO-" << o.zero << " over " << N << " ranks: " << bytes_str(grad_bytes) << " of gradients a step, each rank sends "
     << bytes_str(plan::ring_allreduce_traffic(grad_bytes, N) * (o.zero == 3 ? 1.5 : 1.0)) << "\n";
  row(os, "communication per step", {seconds_str(t_comm)}, 16);
  if (o.step_ms > 0) {
    plan::StepInput in;
    in.compute_s = o.step_ms / 1e3;
    in.grad_bytes = grad_bytes;
    in.ranks = N;
    in.bandwidth_Bps = link.bandwidth_Bps();
    in.latency_s = link.latency_s;
    in.zero_stage = o.zero;
    in.overlap = o.overlap;
    const plan::StepPrediction p = plan::predict_step(in);
    row(os, std::string("step (") + (o.overlap ? "overlapped" : "no overlap, as our trainer") + ")",
        {seconds_str(p.step_s)}, 16);
    row(os, "scaling efficiency (compute / step)", {num_str(p.efficiency * 100, "%.1f") + " %"}, 16);
    row(os, "speed-up over one GPU", {num_str(p.efficiency * N, "%.3g") + " x"}, 16);
  } else {
    os << "  (give --step-ms, one rank's compute per step, for the step time and the scaling efficiency)\n";
  }
}

int run_plan(const PlanCliOptions& o) {
  print_plan(std::cout, o);
  return 0;
}

}  // namespace gpt
