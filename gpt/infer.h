// gpt/infer.h: generating text fast (lesson 10). A trained GPT's weights packed for
// inference (fp32, bf16, int8, int4, 2:4-sparse or w8a8: kernels/weight_format.h), and a Decoder
// that keeps the keys and values of past positions (the KV cache) so each new token costs
// one row of every op instead of a forward over the whole context.
//
//   InferenceModel m = pack_model(model, kernels::WeightFormat::int8, be.memory());
//   Decoder dec(m, be);                          // batch 1; KV cache (L, B, block_size, C) x 2
//   const std::vector<float>& logits = dec.step(prompt.data(), 1, n);   // prefill: (1, n, V)
//   ... dec.step(&next, 1, 1) ...                // one token: reads every weight once
//   Decoder d8(m, be, 1, KvCache::int8);        // the cache in int8 + a scale per head and position (lesson 15)
//
// The Decoder runs the same block as training (gpt::block_forward, gpt/model.h) with its own
// BlockKernels: a Linear layer is Backend::matvec_forward on the packed matrix, attention
// is Backend::attention_decode over the KV cache; the rest are the forward ops of training
// (encoder, layernorm, residual, gelu), so it runs on naive, cpu and cuda alike. Step for
// step its logits equal gpt_forward's on the whole context (tests/test_gpt_infer.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "kernels/decode.h"
#include "kernels/weight_format.h"

namespace gpt {

// A GPT as the decoder reads it: per layer the four matrices (c_attn (3C, C), attn c_proj
// (C, C), c_fc (4C, C), mlp c_proj (C, 4C)) and the output head (wte as (V, C), tied) packed
// in `format`; the embeddings (looked up one row per token), LayerNorms and biases in fp32.
struct InferenceModel {
  InferenceModel() = default;
  // Not copyable: the pointers below point into `vectors`, which a copy would duplicate.
  // Moves keep the buffers (and so the pointers) as they are.
  InferenceModel(const InferenceModel&) = delete;
  InferenceModel& operator=(const InferenceModel&) = delete;
  InferenceModel(InferenceModel&&) noexcept = default;
  InferenceModel& operator=(InferenceModel&&) noexcept = default;
  ~InferenceModel() = default;

  GPTConfig config;
  kernels::WeightFormat format = kernels::WeightFormat::f32;
  Array<float> wte, wpe;  // (V, C), (maxT, C): the lookups (no wpe for llama)
  Array<float> rope_cos, rope_sin;  // llama: RoPE's tables (maxT, hs/2), as gpt_create makes them
  Array<float> vectors;   // every vector of kParams (LayerNorm weights and biases, Linear biases), fp32
  // The fp32 tensors as the block reads them: wte and wpe into the arrays above, the vectors
  // into `vectors` (per layer stacked over L; nullptr for biases the model lacks). The four
  // Linear matrices are nullptr here: the decoder reads them packed, below.
  ParameterTensors params{};
  // A Linear layer's weight (rows = out channels, cols = in channels), packed in the model's
  // memory (kernels/decode.h: the one packed-weight type).
  std::vector<kernels::PackedWeights> qkvw, attprojw, fcw, fcprojw;  // one per layer
  kernels::PackedWeights head;                                        // (V, C)
  // Layer l's packed matrix of Linear layer `which`.
  const kernels::PackedWeights& linear(Linear which, int l) const;
  // Bytes one decode step at batch 1 reads from the weights: every packed matrix, the
  // LayerNorm and bias vectors, one row of wte and one of wpe. What the bandwidth law divides.
  int64_t weight_bytes_per_token() const;
  // Bytes of everything held (wte and wpe whole).
  int64_t bytes() const;
};
// The head's format for a model packed in `format`: the same, except sparse24, whose head
// stays fp32. 2:4 is a pruning format, and pruning (gpt/prune.h) leaves the tied embedding
// whole: packing the unpruned head 2:4 would prune it with no fine-tune (measured on the
// quick model: val loss 0.64 -> 1.30).
kernels::WeightFormat head_format(kernels::WeightFormat format);
// Packs a model (in any memory) into `memory`. nn::Error when a matrix cannot be packed in
// `format` (kernels::check_packable: int4 needs C % 32 == 0, sparse24 C % 8 == 0).
InferenceModel pack_model(const GPT& model, kernels::WeightFormat format, Memory& memory = host_memory());
// A host copy of `model` whose four Linear matrices per layer and wte (the head, tied) are
// replaced by what `format` stores for them (kernels::unpack_weights(pack_weights(w))):
// the float model a quantised decoder must match, and what gpt_forward evaluates to give the
// validation loss of a format. (wte is used for the lookup too: the quantised head and the
// lookup then read the same rounded table; the Decoder looks up its own fp32 wte, so its
// logits match this model's to the head's rounding only, as the tests allow.) w8a8 stores
// int8's weights, so its copy is int8's: the activations' per-token rounding happens inside
// the Decoder's matvecs only, and gpt_forward on this copy does not see it.
GPT dequantized_copy(const GPT& model, kernels::WeightFormat format);

// How the Decoder stores the keys and values of past positions (lesson 15):
//   f32   4 bytes per value (Backend::attention_decode)
//   int8  1 byte per value plus one float scale per position and KV head, the rounding of
//         gpt::quantize_dequantize_heads_int8 (Backend::attention_decode_int8): about 4x
//         fewer bytes; its logits equal gpt::compressed_logits(..., {.kv_int8 = true})'s.
enum class KvCache { f32, int8 };

class Decoder {
 public:
  // Up to max_batch sequences decoded in lockstep, each up to config.block_size positions;
  // the KV cache and every buffer in be.memory() (nn::Error if it differs from m's memory).
  // kv: the cache's format (int8: nn::Error at the first step on a backend without
  // attention_decode_int8, the cuda one today).
  Decoder(const InferenceModel& m, Backend& be, int max_batch = 1, KvCache kv = KvCache::f32);
  KvCache kv_format() const { return kv_; }
  // Positions already in the cache (the same for every sequence).
  int pos() const { return pos_; }
  int max_batch() const { return max_batch_; }
  const InferenceModel& model() const { return *m_; }
  // Forgets positions >= p (0 <= p <= pos()): speculative decoding's rejected drafts.
  void rewind(int p);
  void reset() { rewind(0); }
  // Feeds n tokens to each of B <= max_batch sequences, tokens (B, n) row-major, at
  // positions pos() .. pos()+n-1; returns their logits (B, n, V), copied to the host;
  // pos() += n. nn::Error when pos() + n > block_size, B > max_batch or an id >= V.
  const std::vector<float>& step(const int32_t* tokens, int B, int n);
  // Bytes of the KV cache: f32 2 L max_batch block_size NKV hs floats (C with multi-head
  // attention); int8 2 L max_batch block_size (NKV hs + 4 NKV) (the int8 values and the scales).
  int64_t kv_cache_bytes() const;
  // The int8 cache as stored, layer after layer: (L, max_batch, block_size, NKV hs) int8 and
  // (L, max_batch, block_size, NKV) scales, copied to the host (the tests read them). nn::Error
  // with the f32 cache.
  struct Int8Cache {
    std::vector<int8_t> k, v;
    std::vector<float> kscale, vscale;
  };
  Int8Cache int8_cache() const;
  // Residual + LayerNorm fused or not (gpt::Fusion; default: as the backend says). The
  // logits are the same either way (tests/test_gpt_infer.cpp).
  void set_fusion(Fusion f) { fusion_ = f; }

 private:
  const InferenceModel* m_;
  Backend* be_;
  int max_batch_ = 1;
  int pos_ = 0;
  ActivationLayout layout_;  // one layer's activations (kActivations), reused by every layer
  Fusion fusion_ = Fusion::backend;
  KvCache kv_ = KvCache::f32;
  Array<float> kcache_, vcache_, acts_;   // f32 cache (L, max_batch, block_size, NKV hs); empty with int8
  Array<int8_t> kq_, vq_;                 // int8 cache (L, max_batch, block_size, NKV hs)
  Array<float> kscale_, vscale_;          // its scales (L, max_batch, block_size, NKV)
  Array<int32_t> ids_;
  std::vector<float> logits_;
};

// ---- generation -----------------------------------------------------------------------------
struct GenerateOptions {
  int tokens = 200;
  float temperature = 0.8f;  // 0: greedy
  uint64_t seed = 1337;
  int top_k = 0;             // > 0: draw among the top_k largest logits only (0: all)
  float top_p = 1.0f;        // < 1: nucleus, the fewest most likely tokens whose probability
                             // (at this temperature, after top_k) reaches top_p
  int eos_id = -1;           // >= 0: stop after drawing this id (it is returned)
};
// One draw from a row of V logits as `o` says (one uniform u in [0, 1)). At the defaults
// (top_k 0, top_p 1) exactly nn::sample_from_logits(logits, V, o.temperature, u), so the draws
// of lessons 08-10 are unchanged. Otherwise the kept tokens are the top_k largest logits,
// sorted (largest first, ties by id), cut to the nucleus; the draw is sample_from_logits
// over them. temperature 0 is greedy either way. nn::Error when top_k < 0 or top_p is not
// in (0, 1].
int32_t sample_token(const float* logits, int V, const GenerateOptions& o, float u);
struct GenerateStats {
  double prefill_seconds = 0.0;  // the prompt, one step of n tokens
  double decode_seconds = 0.0;   // the generated tokens, one step each
  int generated = 0;             // fewer than `tokens` when eos_id was drawn
  double tokens_per_second() const { return decode_seconds > 0 ? generated / decode_seconds : 0.0; }
};
// Samples `tokens` ids after `prompt` with the cache (draws as gpt::sample: sample_token
// with an nn::Rng(seed) uniform per token), stopping early after eos_id. When the cache is full
// (block_size positions), it refills it with the last block_size / 2 tokens (one prefill)
// and goes on. Returns the generated ids only.
std::vector<int32_t> generate(Decoder& dec, const std::vector<int32_t>& prompt, const GenerateOptions& o,
                              GenerateStats* stats = nullptr);
// The same without a cache: a full gpt_forward over the (sliding) context per token, as
// gpt::sample does. For the cost comparison of lesson 10.
std::vector<int32_t> generate_without_cache(GPT& model, Backend& be, const std::vector<int32_t>& prompt,
                                            const GenerateOptions& o, GenerateStats* stats = nullptr);

}  // namespace gpt
