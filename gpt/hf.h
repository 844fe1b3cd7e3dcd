// gpt/hf.h: Hugging Face model directories in and out (lesson 12).
//
// A model directory as the hub serves it:
//   config.json                      the architecture and its sizes
//   model.safetensors                the weights (F32, F16 or BF16), or shards listed by
//   model.safetensors.index.json     {"weight_map": {tensor name: shard file}}
//   tokenizer.json                   byte-level BPE (io/bpe.h), when present
//   generation_config.json           bos/eos ids and sampling defaults, when present
//
// Two architectures map onto gpt::GPTConfig (gpt/model.h) with no change to the math:
//   GPT2LMHeadModel   Conv1D weights are stored (in, out), ours (out, in): transposed on the
//                     way in and out; c_attn is already [q | k | v] by rows once transposed;
//                     the head is tied to wte (lm_head.weight, when listed, is ignored:
//                     transformers ties it on load); names with or without "transformer.";
//                     the attn.bias / attn.masked_bias causal-mask buffers are ignored.
//   LlamaForCausalLM  q_proj, k_proj, v_proj -> c_attn rows [q | k | v]; gate_proj, up_proj ->
//                     c_fc rows [gate | up]; down_proj -> mlp.c_proj; o_proj -> attn.c_proj;
//                     RMSNorm weights -> ln_1/ln_2/ln_f; lm_head when untied. RoPE is HF's
//                     rotate_half pairing (kernels/rope.h), so q_proj/k_proj rows need no
//                     permutation.
// Everything in config.json that would change the math and that GPTConfig cannot say (a
// RoPE scaling, attention or MLP biases in Llama, another activation, GPT-2's per-layer
// attention scaling, a LayerNorm eps other than our fixed 1e-5, an MLP width other than 4C,
// ...) is an nn::Error naming the key: a model is loaded exactly or not at all. So is an
// unknown architecture, a tensor missing, one unexpected, one of another shape than the
// config says, and a NaN or infinity in any tensor.
//
// Exported directories (save_hf_model) load with transformers' from_pretrained: config.json
// (torch_dtype float32), model.safetensors (HF names, Conv1D transposed back), a
// generation_config.json, and tokenizer.json when a tokenizer is given. Our character models
// have no tokenizer.json (their vocabulary is a character table, not a BPE): they run in
// transformers on ids, which `nnlab generate --model CKPT --ids` prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpt/model.h"
#include "io/bpe.h"

namespace gpt {

// A file of a hub model may be larger than the checkpoints nnlab trains (gpt2-medium in
// fp32 is 1.4 GB, a 1B Llama 4.4 GB): the loader reads each safetensors file up to this.
inline constexpr uint64_t kMaxHfFileBytes = 64ULL << 30;  // 64 GiB

struct HfModel {
  GPT model;                  // in host memory; gpt_move_to for another backend's
  std::string architecture;   // "GPT2LMHeadModel" / "LlamaForCausalLM"
  std::string dtype;          // "F32" / "F16" / "BF16" as stored ("mixed" when the tensors differ)
  std::optional<nn::BpeTokenizer> tokenizer;  // tokenizer.json, if present and byte-level BPE
  std::string tokenizer_note;  // why there is no tokenizer ("" when there is one)
  int bos_id = -1, eos_id = -1;                 // generation_config.json (else config.json)
  float temperature = 1, top_p = 1;             // generation_config.json (HF's defaults 1, 1;
                                                // "do_sample": false there: temperature 0, greedy)
  int top_k = 0;                                // 0: off (generation_config.json's when given)
};

// Loads a model directory into host memory. training_state = false: parameters only (no
// gradients, no AdamW moments: gpt_create's inference-only model); true: ready to train.
// nn::Error naming the file and the key or tensor for every problem above.
HfModel load_hf_model(const std::string& dir, bool training_state = false);

// Writes `model` (either arch; any memory) as a Hugging Face directory `dir` (created):
// config.json, model.safetensors, generation_config.json, and tokenizer.json when
// `tokenizer` is given (its vocabulary size must be the model's). A gpt2 model without
// biases (bias = false) is written with zero biases: GPT2LMHeadModel always has them, and a
// zero bias is the same function.
void save_hf_model(const GPT& model, const std::string& dir, const nn::BpeTokenizer* tokenizer = nullptr);

// The config.json that save_hf_model writes for `c` (as JSON text), and the GPTConfig that
// load_hf_model derives from a config.json's text (`where` names the file in errors); the
// architecture is returned in *architecture when not null.
std::string hf_config_json(const GPTConfig& c, int bos_id = -1, int eos_id = -1);
GPTConfig config_from_hf_json(const std::string& text, const std::string& where, std::string* architecture = nullptr);

}  // namespace gpt
