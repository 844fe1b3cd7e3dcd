// gpt/plan.cpp: the memory and time arithmetic of gpt/plan.h. Every formula is stated in the
// header beside its declaration; here each line computes one term of it.
#include "gpt/plan.h"

#include <algorithm>
#include <cmath>

#include "nn/check.h"

namespace gpt::plan {

namespace {

using i64 = int64_t;

bool positive_finite(double x) { return std::isfinite(x) && x > 0.0; }

void check_stage(int zero_stage) {
  NN_CHECK(zero_stage >= 0 && zero_stage <= 3,
           "ZeRO stage " << zero_stage << ": the stages are 0 (plain data parallelism), 1 (optimizer state "
                            "sharded), 2 (+ gradients), 3 (+ weights)");
}

}  // namespace

// ---- 1. the training state per parameter -------------------------------------------------------

const char* precision_name(Precision p) { return p == Precision::mixed ? "mixed" : "fp32"; }

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "mixed") return Precision::mixed;
  NN_CHECK(false, "precision '" << s << "': fp32 (everything in fp32, as our trainer) or mixed (bf16 weights and "
                                   "gradients, fp32 master weights and moments)");
  return Precision::fp32;
}

ParamBytes bytes_per_param(Precision p) {
  ParamBytes b;
  b.moments = 4 + 4;  // AdamW's m and v, fp32 in both conventions
  if (p == Precision::fp32) {
    b.weights = 4;
    b.grads = 4;
    b.master = 0;  // the fp32 weights are the copy the optimizer updates
  } else {
    b.weights = 2;  // bf16: what the matmuls read
    b.grads = 2;    // bf16: what the backward writes
    b.master = 4;   // fp32: what AdamW updates, rounded into the bf16 copy after each step
  }
  return b;
}

StateBytes state_bytes_per_rank(double params, Precision p, int zero_stage, int ranks) {
  NN_CHECK(positive_finite(params), "parameters: expected a finite number > 0, got " << params);
  NN_CHECK(ranks >= 1, "ranks: expected >= 1, got " << ranks);
  check_stage(zero_stage);
  const ParamBytes b = bytes_per_param(p);
  const double N = ranks;
  StateBytes s;
  s.weights = params * b.weights;
  s.grads = params * b.grads;
  s.optimizer = params * b.optimizer();
  if (zero_stage >= 1) s.optimizer /= N;  // each rank updates 1/N of the weights
  if (zero_stage >= 2) s.grads /= N;      // ... and keeps only their summed gradients
  if (zero_stage >= 3) s.weights /= N;    // ... and holds only their weights between uses
  return s;
}

// ---- 2. the parameters and activations of a GPT --------------------------------------------

int64_t parameter_count(const GPTConfig& c) {
  const i64 V = c.vocab_size, maxT = c.block_size, L = c.n_layer, C = c.n_embd;
  const i64 QKV = qkv_channels(c), H = mlp_hidden(c), FC = fc_channels(c);
  i64 n = V * C;                                          // wte
  if (c.arch == Arch::gpt2) n += maxT * C;                // wpe (llama: RoPE, no table)
  if (!c.tie_embeddings) n += V * C;                      // lm_head
  i64 layer = QKV * C + C * C + FC * C + C * H;           // c_attn, attn c_proj, c_fc, mlp c_proj
  layer += 2 * C;                                         // ln_1, ln_2 weights
  if (c.bias) layer += 2 * C + QKV + C + FC + C;          // their biases, and the four Linears'
  n += L * layer;
  n += C;                                                 // ln_f weight
  if (c.bias) n += C;                                     // ln_f bias
  return n;
}

const char* attention_store_name(AttentionStore a) {
  switch (a) {
    case AttentionStore::scores_and_maps: return "full";
    case AttentionStore::maps: return "maps";
    case AttentionStore::flash: return "flash";
  }
  return "?";
}

AttentionStore attention_store_of(const GPTConfig& c, bool preatt) {
  if (attention_of(c) == AttentionKind::flash) return AttentionStore::flash;
  return preatt ? AttentionStore::scores_and_maps : AttentionStore::maps;
}

ActivationCount count_activations(const GPTConfig& c, int B, int T, AttentionStore a, bool masks) {
  NN_CHECK(B >= 1 && T >= 1, "activations: batch B and sequence length T must be >= 1, got B=" << B << " T=" << T);
  const i64 C = c.n_embd, NH = c.n_head, V = c.vocab_size;
  const i64 QKV = qkv_channels(c), H = mlp_hidden(c), FC = fc_channels(c);
  const i64 rows = static_cast<i64>(B) * T;      // one row per token
  const i64 stats = c.arch == Arch::gpt2 ? 2 : 1;  // LayerNorm keeps mean and rstd, RMSNorm rstd

  // the attention's store, per token row: (B, NH, T, T) is B T rows of NH T
  i64 attention = 0;
  switch (a) {
    case AttentionStore::scores_and_maps: attention = 2 * NH * T; break;  // preatt, att
    case AttentionStore::maps: attention = NH * T; break;                 // att
    case AttentionStore::flash: attention = NH; break;                    // lse
  }
  // ln1 + stats, qkv, atty, attproj, residual2, ln2 + stats, fch, gelu/swiglu(fch), fcproj, residual3
  i64 per_row = C + stats + QKV + C + C + C + C + stats + FC + H + C + C;
  per_row += attention;
  if (masks) per_row += 2 * C;  // attproj_mask, fcproj_mask

  // encoded, lnf + stats, logits, probs, losses
  i64 outside_row = C + C + stats + V + V + 1;
  if (masks) outside_row += C;  // encoded_mask

  // dresidual, dbranch, dln, datty, dqkv, dfch_gelu, dfch, dlogits (+ dpreatt, datt)
  i64 scratch_row = 4 * C + QKV + H + FC + V;
  if (a != AttentionStore::flash) scratch_row += 2 * NH * T;

  ActivationCount n;
  n.layers = c.n_layer;
  n.per_layer = rows * per_row;
  n.outside = rows * outside_row;
  n.block_input = rows * C;
  n.scratch = rows * scratch_row;
  return n;
}

double bytes_per_activation(Precision p) { return p == Precision::mixed ? 2.0 : 4.0; }

// ---- 3. serving ------------------------------------------------------------------------------

double serving_bytes_per_param(kernels::WeightFormat f, int cols) {
  switch (f) {
    case kernels::WeightFormat::f32: return 4.0;
    case kernels::WeightFormat::bf16: return 2.0;
    case kernels::WeightFormat::int8:
    case kernels::WeightFormat::w8a8: return 1.0 + (cols > 0 ? 4.0 / cols : 0.0);  // + a scale per row
    case kernels::WeightFormat::int4: return 0.5 + 4.0 / kernels::kInt4Group;     // + a scale per 32
    case kernels::WeightFormat::sparse24: return 2.0 + 1.0 / 8.0;                 // half the floats + index
  }
  return 0.0;
}

double kv_cache_bytes(int layers, int kv_heads, int head_size, int64_t T, int64_t batch, double bytes_per_value) {
  NN_CHECK(layers >= 1 && kv_heads >= 1 && head_size >= 1 && T >= 1 && batch >= 1 && positive_finite(bytes_per_value),
           "KV cache: layers, KV heads, head size, T, batch must be >= 1 and the bytes per value > 0, got L="
               << layers << " NKV=" << kv_heads << " hs=" << head_size << " T=" << T << " batch=" << batch
               << " bytes=" << bytes_per_value);
  // k and v, for every layer, KV head, channel of a head, position and sequence
  return 2.0 * layers * kv_heads * head_size * static_cast<double>(T) * static_cast<double>(batch) * bytes_per_value;
}

// ---- 4. how many GPUs ------------------------------------------------------------------------

int64_t gpus_to_train(double params, Precision p, int zero_stage, double other_bytes_per_rank, double usable_bytes) {
  NN_CHECK(positive_finite(usable_bytes), "usable GPU memory: expected a finite number of bytes > 0, got " << usable_bytes);
  NN_CHECK(std::isfinite(other_bytes_per_rank) && other_bytes_per_rank >= 0,
           "activation bytes per rank: expected a finite number >= 0, got " << other_bytes_per_rank);
  // the state of one rank alone, split into what ZeRO shards at this stage and what it does not
  check_stage(zero_stage);
  const StateBytes whole = state_bytes_per_rank(params, p, 0, 1);
  double sharded = 0.0;
  if (zero_stage >= 1) sharded += whole.optimizer;
  if (zero_stage >= 2) sharded += whole.grads;
  if (zero_stage >= 3) sharded += whole.weights;
  const double unsharded = whole.total() - sharded;
  // per rank: unsharded + other + sharded / N <= usable
  const double room = usable_bytes - unsharded - other_bytes_per_rank;
  if (sharded == 0.0) return room >= 0.0 ? 1 : 0;  // nothing shrinks with N
  if (room <= 0.0) return 0;                      // even N -> infinity leaves too much
  const double n = std::ceil(sharded / room);
  if (n > 1e15) return 0;  // "fits" only at an absurd count
  return std::max<int64_t>(1, static_cast<int64_t>(n));
}

int64_t gpus_to_serve(double weight_bytes, double kv_bytes, double usable_bytes) {
  NN_CHECK(positive_finite(usable_bytes), "usable GPU memory: expected a finite number of bytes > 0, got " << usable_bytes);
  NN_CHECK(positive_finite(weight_bytes) && std::isfinite(kv_bytes) && kv_bytes >= 0,
           "serving: weights must be > 0 bytes and the KV cache >= 0, got " << weight_bytes << " and " << kv_bytes);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((weight_bytes + kv_bytes) / usable_bytes)));
}

// ---- 5. the network ---------------------------------------------------------------------------

double ring_allreduce_traffic(double bytes, int ranks) {
  NN_CHECK(std::isfinite(bytes) && bytes >= 0 && ranks >= 1,
           "all-reduce: expected bytes >= 0 and ranks >= 1, got " << bytes << " bytes over " << ranks << " ranks");
  const double N = ranks;
  return 2.0 * (N - 1.0) / N * bytes;  // N - 1 chunks out in the reduce-scatter, N - 1 in the all-gather
}

double ring_allreduce_seconds(double bytes, int ranks, double bandwidth_Bps, double latency_s) {
  NN_CHECK(positive_finite(bandwidth_Bps), "link bandwidth: expected a finite number of bytes/s > 0, got " << bandwidth_Bps);
  NN_CHECK(std::isfinite(latency_s) && latency_s >= 0, "link latency: expected a finite number of seconds >= 0, got "
                                                           << latency_s);
  const double traffic = ring_allreduce_traffic(bytes, ranks);
  const double steps = 2.0 * (ranks - 1);  // each a message between neighbours: one latency
  return traffic / bandwidth_Bps + steps * latency_s;
}

double step_comm_seconds(double grad_bytes, int ranks, int zero_stage, double bandwidth_Bps, double latency_s) {
  check_stage(zero_stage);
  NN_CHECK(positive_finite(bandwidth_Bps), "link bandwidth: expected a finite number of bytes/s > 0, got " << bandwidth_Bps);
  NN_CHECK(std::isfinite(latency_s) && latency_s >= 0, "link latency: expected a finite number of seconds >= 0, got "
                                                           << latency_s);
  if (zero_stage < 3) return ring_allreduce_seconds(grad_bytes, ranks, bandwidth_Bps, latency_s);
  // ZeRO-3: all-gather (forward) + all-gather (backward) + reduce-scatter: three halves
  const double bandwidth_term = 1.5 * ring_allreduce_traffic(grad_bytes, ranks) / bandwidth_Bps;
  return bandwidth_term + 3.0 * (ranks - 1) * latency_s;
}

const std::vector<Link>& link_presets() {
  // Latencies are per ring step, order-of-magnitude figures: measure yours with the ring's own
  // timings and fit_link.
  static const std::vector<Link> links = {
      {"nvlink", "NVLink 4 between the GPUs of one H100 server (900 GB/s both ways)", 450e9, 3e-6,
       "NCCL's own cost model (src/graph/tuning.cc) charges about 0.5 us (LL protocol) to 3.4 us (Simple) per "
       "ring step over NVLink"},
      {"ib200", "InfiniBand HDR, 200 Gb/s a port", 200e9 / 8, 5e-6,
       "about 1 us through the switch and NIC (OSU MPI ping-pong on HDR), a few us more for NCCL's proxy and "
       "GPU-Direct RDMA: NCCL's network latency per step is several us"},
      {"ib400", "InfiniBand NDR, 400 Gb/s a port", 400e9 / 8, 5e-6, "as HDR: latency is set by the NIC, switch and "
                                                                     "software, not the line rate"},
      {"eth100", "100 Gb/s Ethernet with RoCE (RDMA over Converged Ethernet)", 100e9 / 8, 10e-6,
       "RoCE's RDMA path is a few us slower than InfiniBand through Ethernet switches: about 10 us a step"},
      {"eth10", "10 Gb/s Ethernet, TCP sockets (a lab or cloud network)", 10e9 / 8, 50e-6,
       "a TCP round trip through the kernel's network stack takes tens of us: about 50 us a step"},
  };
  return links;
}

const Link& find_link(const std::string& name) {
  std::string names;
  for (const Link& l : link_presets()) {
    if (l.name == name) return l;
    names += (names.empty() ? "" : ", ") + l.name;
  }
  NN_CHECK(false, "unknown link '" << name << "': the presets are " << names);
  return link_presets().front();
}

LinkFit fit_link(const std::vector<LinkSample>& samples) {
  NN_CHECK(samples.size() >= 2, "fit_link: " << samples.size()
                                             << " sample(s): two unknowns (latency and bandwidth) need at least 2 "
                                                "measurements, of different sizes");
  for (size_t i = 0; i < samples.size(); ++i) {
    const LinkSample& s = samples[i];
    NN_CHECK(positive_finite(s.bytes) && positive_finite(s.seconds) && s.ranks >= 2,
             "fit_link: sample " << i << " (" << s.bytes << " bytes, " << s.seconds << " s, " << s.ranks
                                 << " ranks): bytes and seconds must be finite and > 0, and ranks >= 2 (one rank "
                                    "sends nothing)");
  }
  // t_i = a x_i + b y_i, a = 1 / bandwidth, b = latency; weights w_i = 1 / t_i^2 (relative errors).
  // Normal equations:  [Sxx Sxy] [a]   [Sxt]
  //                    [Sxy Syy] [b] = [Syt]
  double Sxx = 0, Sxy = 0, Syy = 0, Sxt = 0, Syt = 0;
  for (const LinkSample& s : samples) {
    const double N = s.ranks;
    const double x = 2.0 * (N - 1.0) / N * s.bytes;
    const double y = 2.0 * (N - 1.0);
    const double w = 1.0 / (s.seconds * s.seconds);
    Sxx += w * x * x;
    Sxy += w * x * y;
    Syy += w * y * y;
    Sxt += w * x * s.seconds;
    Syt += w * y * s.seconds;
  }
  const double det = Sxx * Syy - Sxy * Sxy;
  // Cauchy-Schwarz: det >= 0, and = 0 exactly when x is proportional to y over the samples
  // (every sample the same size at the same rank count): latency and bandwidth then trade off.
  NN_CHECK(det > 1e-12 * Sxx * Syy, "fit_link: the samples cannot separate latency from bandwidth (every one moves "
                                    "the same bytes per ring step): measure at least two different sizes");
  const double a = (Sxt * Syy - Sxy * Syt) / det;
  const double b = (Sxx * Syt - Sxy * Sxt) / det;
  NN_CHECK(a > 0, "fit_link: the fitted time does not grow with the message size (1/bandwidth = "
                      << a << "): are the sizes and times paired right, and the large messages timed long enough?");
  LinkFit f;
  f.bandwidth_Bps = 1.0 / a;
  f.latency_s = b;
  double mean = 0;
  for (const LinkSample& s : samples) mean += s.seconds;
  mean /= static_cast<double>(samples.size());
  double ss_res = 0, ss_tot = 0;
  for (const LinkSample& s : samples) {
    const double fit = ring_allreduce_traffic(s.bytes, s.ranks) * a + 2.0 * (s.ranks - 1) * b;
    ss_res += (s.seconds - fit) * (s.seconds - fit);
    ss_tot += (s.seconds - mean) * (s.seconds - mean);
  }
  f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  return f;
}

StepPrediction predict_step(const StepInput& in) {
  NN_CHECK(positive_finite(in.compute_s), "step prediction: the compute time per step must be > 0 s, got "
                                              << in.compute_s);
  NN_CHECK(std::isfinite(in.flops_per_rank) && in.flops_per_rank >= 0 && std::isfinite(in.peak_flops) &&
               in.peak_flops >= 0,
           "step prediction: FLOPs and peak must be finite and >= 0 (0: no MFU)");
  NN_CHECK(in.ranks >= 1, "step prediction: ranks must be >= 1, got " << in.ranks);
  StepPrediction p;
  p.compute_s = in.compute_s;
  p.comm_s = in.ranks > 1 ? step_comm_seconds(in.grad_bytes, in.ranks, in.zero_stage, in.bandwidth_Bps, in.latency_s)
                          : 0.0;
  p.step_s = in.overlap ? std::max(p.compute_s, p.comm_s) : p.compute_s + p.comm_s;
  p.efficiency = p.compute_s / p.step_s;
  if (in.flops_per_rank > 0 && in.peak_flops > 0) p.mfu = in.flops_per_rank / (p.step_s * in.peak_flops);
  return p;
}

}  // namespace gpt::plan
