// gpt/plan.h: the arithmetic of training and serving a GPT on many GPUs (lesson 14), as pure
// functions: how many bytes a parameter costs, how many an activation, how many GPUs a model
// needs, and how long the gradients take to cross the network. `nnlab plan` (gpt/plan_cli.h)
// prints them as a table; tests/test_plan.cpp checks the activation formula against the
// trainer's own count (gpt::memory_breakdown, gpt/model.h) and the rest against sums done by hand.
//
// Units: bytes and seconds everywhere; GB = 1e9 bytes (what GPU vendors print on the box: an
// "80 GB" H100 has 80e9 bytes, 74.5 GiB). Element counts are int64 (exact, for the tests), byte
// and time estimates double.
//
// Sections, in the order a plan is made:
//   1. the training state per parameter (weights, gradients, AdamW), and ZeRO's cut of it
//   2. the parameters and activations of a GPT of shape (L, C, NH, T, B, V)
//   3. serving: weights in a packed format and the KV cache
//   4. how many GPUs: to train (plain data parallelism, ZeRO 1, 2, 3) and to serve
//   5. the network: the ring all-reduce's time, a fit of a link from measurements, a step's
//      time and MFU on N ranks
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "kernels/weight_format.h"

namespace gpt::plan {

// ---- 1. the training state per parameter -------------------------------------------------------
//
// Training with AdamW keeps, for every parameter: its weight, its gradient and the optimizer's
// two moments m and v. Two conventions:
//
//   fp32   weights 4 + gradients 4 + m 4 + v 4                         = 16 bytes
//          (our trainer: everything in fp32, gpt/model.h GPTData)
//   mixed  bf16 weights 2 + bf16 gradients 2 + fp32 master weights 4 + fp32 m 4 + fp32 v 4
//                                                                       = 16 bytes
//          The forward and backward run on a bf16 copy of the weights; the optimizer updates an
//          fp32 "master" copy (a bf16 weight cannot absorb an update 1000x smaller than itself)
//          and rounds it into the bf16 copy. This is the ZeRO paper's count (Rajbhandari et al.
//          2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", section
//          3.1): 2 bytes of fp16 parameters + 2 of fp16 gradients + K = 12 of optimizer state
//          (fp32 parameters, momentum, variance) = 16 bytes per parameter, so a 7.5B model holds
//          120 GB of state before a single activation.
// Mixed precision does not shrink the state: it saves activation memory and runs the matmuls
// at the tensor cores' bf16 rate. (Our trainer's cuda bf16 mode keeps fp32 weights and casts
// per matmul; this plan counts the textbook layout above.)
enum class Precision : uint8_t { fp32, mixed };
const char* precision_name(Precision p);  // "fp32" / "mixed"
// "fp32" / "mixed" (nn::Error naming both otherwise)
Precision parse_precision(const std::string& s);

struct ParamBytes {
  double weights = 0;  // what the forward reads (fp32: the only copy; mixed: the bf16 copy)
  double grads = 0;
  double master = 0;   // mixed: the fp32 copy the optimizer updates; fp32: 0 (the weights are it)
  double moments = 0;  // AdamW's m and v, fp32
  // What ZeRO calls the optimizer state: the master weights and the moments.
  double optimizer() const { return master + moments; }
  double total() const { return weights + grads + master + moments; }
};
ParamBytes bytes_per_param(Precision p);

// ZeRO (the same paper, section 5): N data-parallel ranks need not each hold the whole state.
//   stage 0  plain data parallelism: every rank holds everything       16 P per rank
//   stage 1  the optimizer state is cut into N shards, one per rank: each rank updates only
//            its shard of the weights, then the ranks all-gather the updated weights
//                                           weights + grads + optimizer / N
//   stage 2  + the gradients: a reduce-scatter leaves each rank only the summed gradients of
//            its own shard                  weights + (grads + optimizer) / N
//   stage 3  + the weights themselves: each layer's weights are all-gathered just before the
//            layer runs and dropped after   (weights + grads + optimizer) / N
// Our trainer implements stage 1 (gpt_shard_optimizer, gpt/train.h): m and v sharded.
struct StateBytes {
  double weights = 0, grads = 0, optimizer = 0;  // per rank, bytes
  double total() const { return weights + grads + optimizer; }
};
// The state one of `ranks` ranks holds for `params` parameters at ZeRO stage `zero_stage`
// (0..3). nn::Error for params <= 0 or not finite, ranks < 1, a stage outside 0..3.
StateBytes state_bytes_per_rank(double params, Precision p, int zero_stage, int ranks);

// ---- 2. the parameters and activations of a GPT --------------------------------------------
//
// The closed forms below are written from the block's diagram, not from gpt/model.h's tables;
// tests/test_plan.cpp checks that they equal num_parameters and memory_breakdown exactly.
// Sizes: L layers, C channels, NH heads, NKV key/value heads, hs = C / NH, QKV = C + 2 NKV hs
// (3C when NKV = NH), H the MLP's hidden width (gpt2 4C), FC its first projection's width
// (gpt2 H; llama 2H: gate and up), V vocabulary, maxT the context, B sequences of T tokens.

// Parameters:  V C (wte) + maxT C (wpe, gpt2) + V C (lm_head, untied llama)
//            + L [ QKV C + C C + FC C + C H  (the four matrices: gpt2 12 C^2)
//                  + 2C (the two norms' weights)
//                  + with biases: 2C (norm biases) + QKV + C + FC + C ]   (gpt2 with biases: 12 C^2 + 13 C)
//            + C (ln_f) + C (its bias, with biases)
int64_t parameter_count(const GPTConfig& c);

// What the attention keeps for its backward, per layer:
//   scores_and_maps  preatt and att, (B, NH, T, T) each: our naive backend
//   maps             att only: our cpu and cuda backends (their backwards need only the softmax output)
//   flash            one log-sum-exp per query row, (B, NH, T): flash attention recomputes the
//                    maps in its backward, so nothing grows as T^2
enum class AttentionStore : uint8_t { scores_and_maps, maps, flash };
const char* attention_store_name(AttentionStore a);  // "full" / "maps" / "flash"
// What a training run of `c` keeps: flash when c's attention is (attention_of), else the
// scores too when `preatt` (memory_breakdown's argument of the same name).
AttentionStore attention_store_of(const GPTConfig& c, bool preatt);

// Elements of activation memory of one training step at (B, T). Per row of B T tokens:
//   each layer keeps (gpt2)  ln1 C, its mean and rstd 2, qkv 3C, atty C, attproj C, residual2 C,
//                            ln2 C, its mean and rstd 2, fch 4C, gelu(fch) 4C, fcproj C,
//                            residual3 C                                    = 18 C + 4
//                   (llama)  the same with RMSNorm (rstd only: 1 + 1), qkv QKV, fch 2H (gate and
//                            up), swiglu H: 7C + QKV + FC + H + 2
//   + the attention's store (above): 2 NH T, NH T (maps) or NH (flash) per row
//   + with dropout, the masks of the two branches: 2C
//   outside the layers: the embedding C (+ its mask C with dropout), ln_f C + stats (2 or 1),
//                       logits V, probs V, loss 1
// Stored: all L layers' activations. Recomputed (activation checkpointing, gpt_set_recompute):
// each block's input only, B T C per layer, plus ONE layer's activations, rebuilt block by
// block during the backward from its input: one more forward per step (about 1/3 more
// compute) for a memory that no longer grows with L.
// The backward's scratch (one layer's activation gradients, reused layer after layer):
//   dresidual, dbranch, dln, datty 4C + dqkv QKV + dfch_gelu H + dfch FC + dlogits V per row,
//   + dpreatt and datt 2 NH T per row unless flash.
// For comparison, Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models", section 4.1) count 34 s b h + 5 a s^2 b bytes per layer for GPT in 16-bit
// (s = T, b = B, h = C, a = NH): about 17 two-byte values per token and channel, 1-byte dropout
// masks, and the maps. Ours are 18 C + 4 fp32 values per token (no masks without dropout; the
// residual sums and the GELU input and output all kept) plus the maps: the same picture.
struct ActivationCount {
  int layers = 0;
  int64_t per_layer = 0;    // one layer's activations
  int64_t outside = 0;      // the embedding, final norm, logits, probs and losses
  int64_t block_input = 0;  // B T C: what recomputation keeps of each layer
  int64_t scratch = 0;      // the backward's scratch (one layer's activation gradients)
  int64_t stored() const { return layers * per_layer + outside; }
  int64_t recomputed() const { return layers * block_input + per_layer + outside; }
};
// masks: dropout masks are kept (dropout > 0 in training). nn::Error for B or T < 1.
ActivationCount count_activations(const GPTConfig& c, int B, int T, AttentionStore a, bool masks);

// Bytes an activation takes: fp32 4; mixed 2 (bf16). An estimate for mixed: real mixed-precision
// code keeps some in fp32 (LayerNorm statistics, the loss's softmax).
double bytes_per_activation(Precision p);

// ---- 3. serving ------------------------------------------------------------------------------
//
// Decoding reads every weight once per generated token (lesson 10's bandwidth law), so the
// weights' format sets both the memory and the speed. Bytes per parameter (kernels/weight_format.h):
//   fp32 4, bf16 2, int8 1 + one fp32 scale per output row (4 / cols), int4 0.5 + one fp32 scale
//   per group of 32 (4 / 32 = 0.125).
// `cols` is a matrix's input width (C); cols <= 0 leaves the int8 row scales out (under 0.1%
// at C = 4096). The plan applies the format to every parameter (in practice the embeddings
// often stay in bf16: a small difference for large models).
double serving_bytes_per_param(kernels::WeightFormat f, int cols = 0);
// The KV cache: every layer keeps k and v for every position of every sequence:
//   2 (k and v) * L * NKV * hs * T * batch * bytes per value
// Grouped-query attention shrinks it by NH / NKV: the reason Llama-2 70B has 8 KV heads.
double kv_cache_bytes(int layers, int kv_heads, int head_size, int64_t T, int64_t batch, double bytes_per_value);

// ---- 4. how many GPUs ------------------------------------------------------------------------
//
// A GPU's memory is not all usable: the CUDA context (~0.5 GB), the allocator's fragmentation,
// the communication library's buffers and the kernels' workspaces take their share. We plan with
// kUsableFraction of it (a common rule of thumb; measure your own with nvidia-smi during a run).
inline constexpr double kUsableFraction = 0.9;

// The fewest data-parallel ranks whose per-rank memory fits in `usable_bytes`: the state at
// ZeRO stage `zero_stage` (state_bytes_per_rank) plus `other_bytes_per_rank` (activations and
// scratch at each rank's own micro-batch: these do not shrink with N). The sharded part falls as
// 1 / N, the rest does not: N = ceil(sharded / (usable - unsharded - other)). 0 when no N fits:
// plain data parallelism (stage 0) shards nothing, so it fits on one GPU or on none; stage 1
// needs the weights and gradients to fit whole. nn::Error for non-positive or non-finite sizes.
int64_t gpus_to_train(double params, Precision p, int zero_stage, double other_bytes_per_rank, double usable_bytes);
// GPUs whose memory holds the weights and the KV cache, split evenly (tensor or pipeline
// parallelism; decoding's own activations are small beside them): ceil(total / usable).
int64_t gpus_to_serve(double weight_bytes, double kv_bytes, double usable_bytes);

// ---- 5. the network ---------------------------------------------------------------------------
//
// The ring all-reduce (kernels/comm.h, v1): N - 1 steps of reduce-scatter and N - 1 of
// all-gather, each step every rank sending one chunk of bytes / N to its neighbour at once. So
//   t(bytes, N) = 2 (N - 1) / N * bytes / bandwidth  +  2 (N - 1) * latency
// The first term is at most 2 bytes / bandwidth however many ranks there are (why the ring won);
// the second grows with N: small messages and many ranks are latency-bound.
// ZeRO-1 and ZeRO-2 move the same bytes: a reduce-scatter of the gradients ((N-1)/N of them) and
// an all-gather of the updated weights ((N-1)/N again) are the all-reduce's two halves. ZeRO-3
// all-gathers the weights twice (forward and backward) and reduce-scatters the gradients once:
// 3 halves, 1.5 times the all-reduce's traffic (the ZeRO paper, section 7).

// One rank's bytes sent by a ring all-reduce of `bytes`: 2 (N - 1) / N * bytes.
double ring_allreduce_traffic(double bytes, int ranks);
// t(bytes, N) above; 0 for one rank. nn::Error for bytes < 0, ranks < 1, bandwidth <= 0,
// latency < 0 or any of them not finite.
double ring_allreduce_seconds(double bytes, int ranks, double bandwidth_Bps, double latency_s);
// A training step's communication at ZeRO stage 0..3: the all-reduce of the gradient bytes,
// (stages 0, 1, 2), or 1.5 times its bandwidth term and 3 (N - 1) latencies (stage 3).
double step_comm_seconds(double grad_bytes, int ranks, int zero_stage, double bandwidth_Bps, double latency_s);

// Links between ranks. A link never delivers its advertised rate: protocol headers, the
// collective's own copies and the reduction kernels take their share. We plan with
// kLinkEfficiency of it (80%: the usual fraction of the line rate NCCL's all_reduce_perf
// reports as "bus bandwidth" on a healthy cluster).
inline constexpr double kLinkEfficiency = 0.8;
struct Link {
  std::string name;           // "nvlink", "ib400", ...
  std::string description;    // what it is
  double advertised_Bps = 0;  // bytes per second, one direction
  double latency_s = 0;       // per step of the ring: one message between neighbours
  std::string latency_source; // where the latency figure comes from, in words
  double bandwidth_Bps() const { return advertised_Bps * kLinkEfficiency; }
};
// nvlink (H100 NVLink 4, 450 GB/s a direction), ib200 (HDR InfiniBand, 200 Gb/s = 25 GB/s),
// ib400 (NDR, 400 Gb/s = 50 GB/s), eth100 (100 Gb/s Ethernet with RoCE, 12.5 GB/s), eth10
// (10 Gb/s Ethernet over TCP, 1.25 GB/s); latencies in each row's latency_source.
const std::vector<Link>& link_presets();
// By name; nn::Error naming the presets otherwise.
const Link& find_link(const std::string& name);

// Measured all-reduce times -> the link's latency and bandwidth. Each sample: `bytes` all-reduced
// over `ranks` ranks took `seconds`. The model t = x / bandwidth + y * latency with
// x = 2 (N - 1) / N * bytes and y = 2 (N - 1) is linear in (1 / bandwidth, latency): a least-squares
// fit of two coefficients, with no intercept. Each sample's error is weighted by 1 / t (we
// minimise the RELATIVE errors): timings span microseconds to seconds, and plain least squares
// would fit the large messages only and leave the latency to their noise.
// r2: 1 - sum (t - fit)^2 / sum (t - mean t)^2 over the samples (1: every point on the model).
// nn::Error for fewer than 2 samples, a sample with bytes <= 0, seconds <= 0 or ranks < 2 (one
// rank sends nothing), a non-finite value, samples that cannot tell latency from bandwidth (all
// one size at one rank count), or a fit whose time does not grow with the size (bandwidth <= 0).
// The latency may come out slightly negative from noisy small-message timings: it is returned
// as fitted, and a poor r2 says so.
struct LinkSample {
  double bytes = 0, seconds = 0;
  int ranks = 2;
};
struct LinkFit {
  double latency_s = 0, bandwidth_Bps = 0, r2 = 0;
};
LinkFit fit_link(const std::vector<LinkSample>& samples);

// One training step on N data-parallel ranks, each doing the compute one rank did alone (its
// own micro-batches: the global batch grows with N). Our trainer all-reduces the gradients after
// the whole backward (gpt/train.h: accumulate_gradients, then allreduce_gradients), so by default
// nothing overlaps:  step = compute + comm.  With overlap (PyTorch DDP's buckets all-reduced
// while the backward goes on, at best):  step = max(compute, comm).
struct StepInput {
  double compute_s = 0;       // one rank's forward + backward + optimizer time, alone
  double grad_bytes = 0;      // the gradients all-reduced per step (P * bytes per gradient)
  int ranks = 1;
  double bandwidth_Bps = 0;   // effective (Link::bandwidth_Bps: already derated)
  double latency_s = 0;
  int zero_stage = 0;
  bool overlap = false;
  double flops_per_rank = 0;  // FLOPs one rank does per step (6 N tokens...); 0: no MFU
  double peak_flops = 0;      // one rank's peak FLOP/s; 0: no MFU
};
struct StepPrediction {
  double compute_s = 0, comm_s = 0, step_s = 0;
  double efficiency = 0;  // compute / step: the speed-up over one rank is N * efficiency
  double mfu = 0;         // flops_per_rank / (step * peak_flops); 0 when not given
};
StepPrediction predict_step(const StepInput& in);

}  // namespace gpt::plan
