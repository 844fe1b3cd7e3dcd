// gpt/train.h: the trainer and sampler around gpt/model.h: data batches, the learning-rate
// schedule, checkpoints (safetensors + config + tokenizer + AdamW state), evaluation,
// sampling, the training loop with its progress bar and log, the dump of named tensors and
// the diff of two dumps.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "io/text.h"

namespace gpt {

// Every hyper-parameter of a run. Defaults: nanoGPT's Shakespeare-char CPU run
// (4 layers, 4 heads, 128 wide, context 64, batch 12, 2000 iterations, lr 1e-3 -> 1e-4).
struct TrainOptions {
  // model
  int n_layer = 4, n_head = 4, n_embd = 128, block_size = 64;
  float dropout = 0.0f;
  bool bias = true;  // biases in Linear and LayerNorm (nanoGPT's Shakespeare config: false)
  // lesson 11's block (gpt/model.h GPTConfig): arch gpt2 | llama; llama's options
  std::string arch = "gpt2";
  int n_kv_head = 0;       // 0: n_head
  int ffn_hidden = 0;      // 0: default_ffn_hidden(n_embd)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool untied_head = false;  // llama: a separate lm_head instead of wte
  std::string attention = "auto";  // auto | full | flash
  // data
  std::string data;           // a text file; empty: Tiny Shakespeare, else the Debian fallback
  double val_fraction = 0.1;  // the last 10% of the text is the validation split
  // optimisation
  int batch_size = 12;
  int grad_accum = 1;  // micro-batches per step; each step sees batch_size * grad_accum sequences
  int max_iters = 2000;
  float lr = 1e-3f, min_lr = 1e-4f;
  int warmup_iters = 100;
  int lr_decay_iters = 0;  // 0: max_iters
  float weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.99f, eps = 1e-8f;  // eps >= kMinEps
  float grad_clip = 1.0f;  // 0: off
  // evaluation, checkpoints, logs
  int eval_interval = 250, eval_iters = 20;
  std::string out_dir = "out/gpt";
  std::string resume;      // a checkpoint to continue from (its step, weights, AdamW state)
  bool overwrite = false;  // a new run may replace the checkpoints of an earlier one in out_dir
  std::string log;     // default <out_dir>/log.jsonl; "none" disables
  double time_budget_s = 0.0;  // > 0: stop after this many seconds (then evaluate, save)
  uint64_t seed = 1337;
  std::string backend = "cpu";
  std::string precision = "auto";  // the cuda backend's (gpt/backend_cuda.h); host backends: fp32
  int threads = 0;  // 0: OpenMP's default
  // sampling after training
  int sample_tokens = 0;
  std::string prompt = "\n";
  float temperature = 0.8f;
  int top_k = 0;  // 0: all
  // debugging: write named activations and gradients at one step
  int dump_step = -1;
  std::string dump_path;
  bool quiet = false;  // no progress bar (tests)
  std::string config;  // the config file the options were read from (gpt/cli.h)
  // data parallelism (lesson 14): the ranks training together; nullptr: process_comm() (set by
  // the front door when mpirun started it), else this process alone. allreduce: the gradients'
  // all-reduce version (kernels/comm.h: ring, library).
  kernels::comm::Comm* comm = nullptr;
  std::string allreduce = "library";
  // ZeRO stage (0: every rank holds all the AdamW moments; 1: each rank holds its shard,
  // gpt_shard_optimizer) and activation recomputation (gpt_set_recompute): lesson 14's two
  // ways to spend time or traffic on memory. Neither changes what is trained beyond rounding.
  int zero = 0;
  bool recompute = false;
  // BitNet b1.58 (lesson 15, gpt/compress.h): every block Linear trained ternary with the
  // straight-through estimator (ternary_train_step): the model and its checkpoints hold the fp32
  // latent weights, the forward and backward see clamp(round(W / mean|W|), -1, 1) mean|W|;
  // evaluations run the ternary weights. Activations stay fp32 unless ternary_a8.
  bool ternary = false;
  // BitNet b1.58's whole recipe, W1.58A8: ternary weights as `ternary` (implied: ternary may stay
  // false) AND every block Linear's input rounded per token to int8 (absmax / 127,
  // gpt/compress.h's set_int8_activations) in every forward, training's with the
  // straight-through estimator (dx passes the rounding unchanged). Evaluations, the
  // sample and the checkpoints' "activations" = "int8" key follow it. Needs full attention.
  bool ternary_a8 = false;
  // The flags given on the command line or in the config file ("n-layer", "prompt", ...),
  // as add_train_flags records them: --resume refuses a model flag that contradicts the
  // checkpoint, and a default --prompt may be replaced where an explicit one may not.
  std::set<std::string> given;
};

// The smallest AdamW epsilon accepted: eps = 0 turns a weight whose v is 0 into 0 / 0 = NaN.
inline constexpr double kMinEps = 1e-30;

// nn::Error naming the flag for an option out of its range or not finite, --dump-step
// without --dump-path (or the reverse). train() calls it; the flags' validators
// (gpt/cli.cpp) refuse the same values earlier.
void check_options(const TrainOptions& o);

// The model the options describe, for a vocabulary of vocab_size (validated).
GPTConfig config_from(const TrainOptions& o, int vocab_size);

// nanoGPT's schedule: linear warm-up from lr/warmup to lr over warmup_iters steps, then
// cosine decay to min_lr at lr_decay_iters, min_lr after.
//   it < W:          lr * (it + 1) / W
//   W <= it <= D:    min_lr + (lr - min_lr) * (1 + cos(pi * (it - W) / (D - W))) / 2
//   it > D:          min_lr
float learning_rate(const TrainOptions& o, int it);

// A random batch: B sequences of T tokens at random offsets of `tokens`, targets shifted by
// one. The offsets are a pure function of (seed, stream, index), so a resumed run draws the
// same batches as an uninterrupted one. nn::Error if tokens.size() < T + 1.
void get_batch(const std::vector<int32_t>& tokens, int B, int T, uint64_t seed, uint64_t stream,
               uint64_t index, std::vector<int32_t>& x, std::vector<int32_t>& y);

// ---- checkpoints -----------------------------------------------------------------------
struct TrainState {
  int step = 0;  // optimizer steps completed
  // best validation loss so far; infinity: none yet ("none" in the metadata)
  float best_val_loss = std::numeric_limits<float>::infinity();
  std::string corpus;  // what it was trained on
  bool ternary = false;  // trained with --ternary: the weights are BitNet latents ("ternary" = "1")
  // trained with --ternary-a8 (ternary is then true too): the Linears' inputs rounded to int8
  // ("activations" = "int8"; the key is absent for fp32 activations)
  bool int8_activations = false;
};
// Writes params under their ParamSlice names, plus (with_optimizer) AdamW's moments as
// "adam.m.<name>" / "adam.v.<name>"; metadata: the config, the vocabulary, adam_t and the
// TrainState. Atomic (temporary file, fsync, rename); nn::Error, and the old file kept,
// when any value is NaN or infinite (nn::save_safetensors).
// moments: the full AdamW moments of a model whose optimizer is sharded (ZeRO-1:
// gpt_gather_moments); nullptr: the model's own (refused for a sharded model).
void save_checkpoint(const std::string& path, const GPT& model, const nn::CharVocab& vocab,
                     const TrainState& state, bool with_optimizer = true, const FullMoments* moments = nullptr);
struct LoadedCheckpoint {
  GPT model;
  nn::CharVocab vocab;
  TrainState state;
  bool has_optimizer = false;
};
// nn::Error for a missing, truncated or corrupt file (both checksums: data and header), a
// NaN or infinity in any tensor, a metadata value that is not valid (the message names the
// key), a tensor missing, extra or of another shape than the metadata's config says
// (checked before the model is allocated), a negative AdamW v, or adam_t != step.
// The model is put in `memory` (a backend's: gpt_move_to), host memory by default.
LoadedCheckpoint load_checkpoint(const std::string& path, Memory& memory = host_memory());
// "model.safetensors" style names for a vocabulary in metadata: the bytes as hex.
std::string vocab_to_hex(const nn::CharVocab& vocab);
nn::CharVocab vocab_from_hex(const std::string& hex);

// ---- evaluation and sampling -------------------------------------------------------------
// Mean loss over `iters` fixed batches (the same ones at every evaluation) of a split.
float evaluate(GPT& model, Backend& be, const std::vector<int32_t>& tokens, int B, int T, int iters,
               uint64_t seed, uint64_t split_id);

struct SampleOptions {
  std::string prompt = "\n";
  int tokens = 200;
  float temperature = 0.8f;
  int top_k = 0;
  uint64_t seed = 1337;
};
// Generates `tokens` characters after the prompt (the prompt is not included in the result).
// nn::Error if the prompt has a character the vocabulary lacks, or is empty.
std::string sample(GPT& model, Backend& be, const nn::CharVocab& vocab, const SampleOptions& o);

// ---- training ------------------------------------------------------------------------------
// The ranks this process trains with when TrainOptions::comm is not set: app/nnlab.cpp installs
// the MPI engine's Comm when mpirun started it (the trainer itself never links MPI).
void set_process_comm(kernels::comm::Comm* comm);
kernels::comm::Comm* process_comm();

// Data parallelism, checked: every rank hashes its weights (FNV-1a over their bytes) and all
// ranks compare the hashes. nn::Error on every rank, naming the ranks that differ, when they do
// not all hold the same bits (the replicas diverged: a rank that skipped or broke the all-reduce,
// or different code or data on one machine). Nothing to do with one rank.
void check_replicas(const GPT& model, kernels::comm::Comm& comm, int step);

// Sets the OpenMP thread count when threads > 0; returns the count in use (1 without OpenMP).
// nn::Error above nn::max_threads_allowed() (4x the hardware threads).
int use_threads(int threads);

struct TrainResult {
  int steps = 0;
  float final_train_loss = 0.0f;  // last evaluation
  float final_val_loss = 0.0f;
  float best_val_loss = 0.0f;  // infinity when no checkpoint recorded one
  double seconds = 0.0;
  double ms_per_iter = 0.0;  // mean over the steps of this run
  std::vector<float> step_losses;  // the training loss of every step of this run
  std::string best_path, last_path;  // the checkpoints this run wrote ("" for one it did not)
};
// The whole run: corpus, model (new or resumed), loop, evaluations, checkpoints, log,
// samples. With N ranks (TrainOptions::comm or process_comm()): each rank draws its own
// micro-batches (step s, rank r, micro-batch k: batch index s N K + r K + k, the ones one process
// with --grad-accum N K would draw), the gradients are all-reduced, every rank takes the same
// AdamW step; at every evaluation the replicas are checked equal (check_replicas); rank 0 alone
// prints, logs, evaluates, writes checkpoints and samples. A checkpoint holds no rank count: it
// resumes under any number of ranks. Prints to `os`. nn::Error for bad options, data or checkpoints, for a non-finite
// loss (the message names the last good checkpoint, which is kept, or says there is none),
// for a log that cannot be written, and for a new run (no --resume) into an out_dir that
// holds checkpoints unless `overwrite`. A resumed run appends to the log.
TrainResult train(const TrainOptions& o, std::ostream& os);

// ---- dump and diff ---------------------------------------------------------------------------
// Writes the last forward's named activations (activation_views), "loss", and every
// parameter gradient as "grad.<name>" to a safetensors file.
void write_dump(const std::string& path, const GPT& model);
struct DiffRow {
  std::string name;
  int64_t numel = 0;
  double max_abs_err = 0.0;
  double max_rel_err = 0.0;  // max |a - b| / max |b|: error relative to the tensor's scale
};
// Compares the tensors two dumps share (shape mismatch: nn::Error); rows in a's order.
// `only_a` / `only_b` get the names present in one file only.
std::vector<DiffRow> diff_dumps(const std::string& a, const std::string& b, std::vector<std::string>* only_a = nullptr,
                                std::vector<std::string>* only_b = nullptr);

}  // namespace gpt
