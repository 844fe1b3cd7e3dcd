// gpt/hf.cpp: Hugging Face model directories in and out (see gpt/hf.h).
//
// Sections:
//   config     config.json <-> GPTConfig, every unsupported key refused by name
//   names      our parameter slices <-> Hugging Face tensors (a slice is one or more HF
//              tensors stacked by rows, transposed for GPT-2's Conv1D)
//   loading    the safetensors files (single or sharded), the tensors checked and copied in
//   saving     the directory transformers' from_pretrained reads
#include "gpt/hf.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "io/safetensors.h"
#include "nn/check.h"

namespace gpt {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kGpt2 = "GPT2LMHeadModel";
constexpr const char* kLlama = "LlamaForCausalLM";

std::string read_text(const std::string& path, const std::string& what) {
  const std::vector<uint8_t> bytes = nn::read_file(path, what, "check the model directory", 64ULL << 20);
  return std::string(bytes.begin(), bytes.end());
}

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    NN_CHECK(false, where << " is not valid JSON: " << e.what());
  }
  return {};
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os.str() + "]";
}

// ---- config -----------------------------------------------------------------------------------

// A config.json read with every access checked: a missing required key, a value of the wrong
// type and an unsupported value are errors naming the file and the key.
class Config {
 public:
  Config(json j, std::string where) : j_(std::move(j)), where_(std::move(where)) {
    NN_CHECK(j_.is_object(), where_ << " is not a JSON object");
  }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int integer(const char* key) const {
    NN_CHECK(has(key), where_ << " has no '" << key << "': it is needed to build the model");
    return integer_at(key);
  }
  int integer_or(const char* key, int fallback) const { return has(key) ? integer_at(key) : fallback; }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    NN_CHECK(j_[key].is_number(), where_ << ": '" << key << "' is " << j_[key].dump() << ", expected a number");
    return j_[key].get<double>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    NN_CHECK(j_[key].is_boolean(), where_ << ": '" << key << "' is " << j_[key].dump() << ", expected true or false");
    return j_[key].get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    NN_CHECK(j_[key].is_string(), where_ << ": '" << key << "' is " << j_[key].dump() << ", expected a string");
    return j_[key].get<std::string>();
  }
  // A key whose value changes the math and that this model supports only at `ok`.
  [[noreturn]] void unsupported(const char* key, const std::string& why) const {
    NN_CHECK(false, where_ << ": '" << key << "' = " << j_[key].dump() << " is not supported: " << why
                           << "; loading it anyway would run a different model than the file describes");
  }
  void require_bool(const char* key, bool fallback, bool ok, const std::string& why) const {
    if (boolean_or(key, fallback) != ok) unsupported(key, why);
  }
  void require_null(const char* key, const std::string& why) const {
    if (has(key)) unsupported(key, why);
  }
  const json& raw() const { return j_; }
  const std::string& where() const { return where_; }

 private:
  int integer_at(const char* key) const {
    const json& v = j_[key];
    NN_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= (1 << 30),
             where_ << ": '" << key << "' is " << v.dump() << ", expected a positive integer");
    return static_cast<int>(v.get<int64_t>());
  }
  json j_;
  std::string where_;
};

// The architecture a config.json names (architectures[0], else model_type).
std::string architecture_of(const Config& cfg) {
  const json& j = cfg.raw();
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    NN_CHECK(j["architectures"].size() == 1 && j["architectures"][0].is_string(),
             cfg.where() << ": 'architectures' is " << j["architectures"].dump() << ", expected one name");
    arch = j["architectures"][0].get<std::string>();
  } else {
    const std::string type = cfg.string_or("model_type", "");
    arch = type == "gpt2" ? kGpt2 : type == "llama" ? kLlama : "model_type " + type;
  }
  NN_CHECK(arch == kGpt2 || arch == kLlama, cfg.where() << ": unknown architecture '" << arch
                                                        << "': nnlab loads " << kGpt2 << " and " << kLlama
                                                        << " (Llama-family: SmolLM, TinyLlama, ...)");
  return arch;
}

// The shortest decimal that reads back as this float (1e-05, not 9.999999747378752e-06).
double shortest(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// ---- names ------------------------------------------------------------------------------------

// One Hugging Face tensor inside one of our slices: `rows` rows of the slice (out channels),
// stored transposed (GPT-2's Conv1D: (in, out)) or not.
struct Part {
  std::string name;
  int64_t rows;
  bool transpose;
};

// The HF tensors that make up slice `s` of a model of config c, in row order.
std::vector<Part> parts_of(const ParamSlice& s, const GPTConfig& c) {
  const int64_t rows = s.shape[0];
  const std::string name = s.name;
  if (c.arch == Arch::gpt2) {
    // transformer.<our name>, with the four Linear weights transposed (Conv1D)
    const bool conv1d = s.layer >= 0 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
                        (name.find(".c_attn.") != std::string::npos || name.find(".c_proj.") != std::string::npos ||
                         name.find(".c_fc.") != std::string::npos);
    if (name == "wte" || name == "wpe") return {{"transformer." + name + ".weight", rows, false}};
    return {{"transformer." + name, rows, conv1d}};
  }
  const std::string layer = "model.layers." + std::to_string(s.layer) + ".";
  const std::string rest = s.layer >= 0 ? name.substr(name.find('.', 2) + 1) : name;  // after "h.<l>."
  const int64_t kv = kv_channels(c), H = mlp_hidden(c);
  if (name == "wte") return {{"model.embed_tokens.weight", rows, false}};
  if (name == "ln_f.weight") return {{"model.norm.weight", rows, false}};
  if (name == "lm_head.weight") return {{"lm_head.weight", rows, false}};
  if (rest == "ln_1.weight") return {{layer + "input_layernorm.weight", rows, false}};
  if (rest == "ln_2.weight") return {{layer + "post_attention_layernorm.weight", rows, false}};
  if (rest == "attn.c_attn.weight")
    return {{layer + "self_attn.q_proj.weight", c.n_embd, false},
            {layer + "self_attn.k_proj.weight", kv, false},
            {layer + "self_attn.v_proj.weight", kv, false}};
  if (rest == "attn.c_proj.weight") return {{layer + "self_attn.o_proj.weight", rows, false}};
  if (rest == "mlp.c_fc.weight") return {{layer + "mlp.gate_proj.weight", H, false}, {layer + "mlp.up_proj.weight", H, false}};
  if (rest == "mlp.c_proj.weight") return {{layer + "mlp.down_proj.weight", rows, false}};
  NN_CHECK(false, "gpt/hf.cpp: no Hugging Face name for llama tensor '" << name << "' (a new kParams row?)");
  return {};
}

// The shape the file stores part p of slice s in.
std::vector<int64_t> hf_shape(const Part& p, const ParamSlice& s) {
  if (s.shape.size() == 1) return {p.rows};
  return p.transpose ? std::vector<int64_t>{s.shape[1], p.rows} : std::vector<int64_t>{p.rows, s.shape[1]};
}

// Tensors a hub file may hold that are not parameters (buffers), or that the tied head repeats.
bool ignored(const std::string& name, const GPTConfig& c) {
  const auto ends_with = [&](const char* suffix) {
    const std::string x(suffix);
    return name.size() >= x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0;
  };
  if (name == "lm_head.weight") return c.tie_embeddings;  // transformers re-ties it to the embedding on load
  if (c.arch == Arch::gpt2) return ends_with(".attn.bias") || ends_with(".attn.masked_bias");  // causal-mask buffers
  return ends_with(".self_attn.rotary_emb.inv_freq");  // RoPE's buffer in older Llama files
}

// ---- loading ----------------------------------------------------------------------------------

struct Loaded {
  std::string file;  // which file held it (for messages)
  nn::SafetensorsTensor t;
};

// Every tensor of the directory's safetensors file(s), GPT-2's names given the "transformer."
// prefix the hub's gpt2 file lacks.
std::map<std::string, Loaded> read_tensors(const std::string& dir, const GPTConfig& c) {
  std::map<std::string, Loaded> all;
  const nn::LoadOptions opts{nn::NonFinite::Refuse, kMaxHfFileBytes, /*half_precision=*/true};
  const auto add = [&](const std::string& file, nn::SafetensorsFile f, const std::map<std::string, std::string>* index) {
    for (auto& [raw, t] : f.tensors) {
      std::string name = raw;
      if (c.arch == Arch::gpt2 && name.rfind("transformer.", 0) != 0 && name != "lm_head.weight") {
        name = "transformer." + name;
      }
      if (index != nullptr) {
        const auto it = index->find(raw);
        NN_CHECK(it != index->end() && (fs::path(dir) / it->second).string() == file,
                 file << " holds tensor '" << raw << "', which model.safetensors.index.json "
                      << (it == index->end() ? "does not list" : "puts in " + it->second)
                      << ": the shards and their index disagree");
      }
      NN_CHECK(all.count(name) == 0, "tensor '" << raw << "' is in both " << all[name].file << " and " << file);
      all[name] = Loaded{file, std::move(t)};
    }
  };
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    add(single.string(), nn::read_safetensors(single.string(), opts), nullptr);
    return all;
  }
  NN_CHECK(fs::exists(index_path), "model directory " << dir << " has neither model.safetensors nor "
                                                      << "model.safetensors.index.json (a sharded model)");
  const json idx = parse_json(read_text(index_path.string(), "shard index"), index_path.string());
  NN_CHECK(idx.is_object() && idx.contains("weight_map") && idx["weight_map"].is_object(),
           index_path.string() << " has no \"weight_map\" object {tensor name: shard file}");
  std::map<std::string, std::string> index;
  std::set<std::string> files;
  for (const auto& [name, file] : idx["weight_map"].items()) {
    NN_CHECK(file.is_string(), index_path.string() << ": weight_map['" << name << "'] is not a file name");
    const std::string f = file.get<std::string>();
    // a shard is a file of this directory, never a path out of it
    NN_CHECK(!f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos && f != "." &&
                 f != "..",
             index_path.string() << ": weight_map['" << name << "'] = \"" << f << "\" is not a file name in " << dir);
    index[name] = f;
    files.insert(f);
  }
  for (const std::string& f : files) {
    const std::string path = (fs::path(dir) / f).string();
    add(path, nn::read_safetensors(path, opts), &index);
  }
  for (const auto& [raw, file] : index) {
    std::string name = raw;
    if (c.arch == Arch::gpt2 && name.rfind("transformer.", 0) != 0 && name != "lm_head.weight") name = "transformer." + name;
    NN_CHECK(all.count(name) == 1, index_path.string() << " lists tensor '" << raw << "' in " << file
                                                       << ", which does not hold it");
  }
  return all;
}

int first_id(const json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int>();
  return -1;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  NN_CHECK(f.good(), "cannot open " << path << " for writing: check the directory is writable");
  f << text;
  f.close();
  NN_CHECK(f.good(), "writing " << path << " failed (is the disk full?)");
}

}  // namespace

// ---- config -----------------------------------------------------------------------------------

GPTConfig config_from_hf_json(const std::string& text, const std::string& where, std::string* architecture) {
  const Config cfg(parse_json(text, where), where);
  const std::string arch = architecture_of(cfg);
  if (architecture != nullptr) *architecture = arch;
  GPTConfig c;
  c.dropout = 0.0f;
  if (arch == kGpt2) {
    c.arch = Arch::gpt2;
    c.vocab_size = cfg.integer("vocab_size");
    c.block_size = cfg.integer("n_positions");
    c.n_layer = cfg.integer("n_layer");
    c.n_head = cfg.integer("n_head");
    c.n_embd = cfg.integer("n_embd");
    c.bias = true;
    c.tie_embeddings = true;
    const std::string act = cfg.string_or("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
      cfg.unsupported("activation_function", "the MLP's GELU is the tanh approximation (gelu_new, gelu_pytorch_tanh)");
    }
    if (cfg.number_or("layer_norm_epsilon", 1e-5) != 1e-5) {
      cfg.unsupported("layer_norm_epsilon", "our LayerNorm's eps is fixed at 1e-5");
    }
    if (cfg.has("n_inner") && cfg.integer("n_inner") != 4 * c.n_embd) {
      cfg.unsupported("n_inner", "GPT-2's MLP is 4 n_embd wide here (" + std::to_string(4 * c.n_embd) + ")");
    }
    cfg.require_bool("scale_attn_weights", true, true, "attention scores are always scaled by 1/sqrt(head size)");
    cfg.require_bool("scale_attn_by_inverse_layer_idx", false, false, "no per-layer attention scaling");
    cfg.require_bool("reorder_and_upcast_attn", false, false, "no reordered, upcast attention");
    cfg.require_bool("add_cross_attention", false, false, "a decoder-only model has no cross-attention");
    cfg.require_bool("tie_word_embeddings", true, true, "GPT-2's head is the token embedding");
  } else {
    c.arch = Arch::llama;
    c.bias = false;
    c.vocab_size = cfg.integer("vocab_size");
    c.block_size = cfg.integer("max_position_embeddings");
    c.n_layer = cfg.integer("num_hidden_layers");
    c.n_head = cfg.integer("num_attention_heads");
    c.n_embd = cfg.integer("hidden_size");
    c.n_kv_head = cfg.integer_or("num_key_value_heads", c.n_head);
    c.ffn_hidden = cfg.integer("intermediate_size");
    c.rope_theta = static_cast<float>(cfg.number_or("rope_theta", 10000.0));
    c.norm_eps = static_cast<float>(cfg.number_or("rms_norm_eps", 1e-6));
    c.tie_embeddings = cfg.boolean_or("tie_word_embeddings", false);  // LlamaConfig's default: untied
    if (cfg.string_or("hidden_act", "silu") != "silu") cfg.unsupported("hidden_act", "the SwiGLU MLP uses silu");
    cfg.require_null("rope_scaling", "RoPE runs unscaled (no linear, dynamic, yarn or llama3 scaling)");
    cfg.require_bool("attention_bias", false, false, "the Llama projections have no biases here");
    cfg.require_bool("mlp_bias", false, false, "the Llama projections have no biases here");
    cfg.require_bool("rope_interleaved", false, false, "RoPE pairs channel i with i + hs/2 (rotate_half), not "
                                                     "adjacent channels");
    if (cfg.has("head_dim") && cfg.integer("head_dim") * c.n_head != c.n_embd) {
      cfg.unsupported("head_dim", "the head size is hidden_size / num_attention_heads = " +
                                      std::to_string(c.n_embd / c.n_head));
    }
  }
  try {
    validate(c);
  } catch (const nn::Error& e) {
    NN_CHECK(false, where << " describes a model nnlab cannot build: " << e.what());
  }
  return c;
}

std::string hf_config_json(const GPTConfig& c, int bos_id, int eos_id) {
  validate(c);
  ojson j;
  const auto id = [](int v) { return v >= 0 ? ojson(v) : ojson(nullptr); };
  if (c.arch == Arch::gpt2) {
    j["architectures"] = {kGpt2};
    j["model_type"] = "gpt2";
    j["vocab_size"] = c.vocab_size;
    j["n_positions"] = c.block_size;
    j["n_ctx"] = c.block_size;
    j["n_embd"] = c.n_embd;
    j["n_layer"] = c.n_layer;
    j["n_head"] = c.n_head;
    j["n_inner"] = nullptr;  // 4 n_embd
    j["activation_function"] = "gelu_new";
    j["layer_norm_epsilon"] = 1e-5;
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["initializer_range"] = 0.02;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
    j["use_cache"] = true;
    j["tie_word_embeddings"] = true;
  } else {
    j["architectures"] = {kLlama};
    j["model_type"] = "llama";
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.n_embd;
    j["intermediate_size"] = mlp_hidden(c);
    j["num_hidden_layers"] = c.n_layer;
    j["num_attention_heads"] = c.n_head;
    j["num_key_value_heads"] = kv_heads(c);
    j["head_dim"] = c.n_embd / c.n_head;
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = c.block_size;
    j["rms_norm_eps"] = shortest(c.norm_eps);
    j["rope_theta"] = shortest(c.rope_theta);
    j["rope_scaling"] = nullptr;
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["attention_dropout"] = 0.0;
    j["pretraining_tp"] = 1;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    j["tie_word_embeddings"] = c.tie_embeddings;
  }
  j["bos_token_id"] = id(bos_id);
  j["eos_token_id"] = id(eos_id);
  j["torch_dtype"] = "float32";
  j["transformers_version"] = "4.48.3";
  return j.dump(2) + "\n";
}

// ---- loading ----------------------------------------------------------------------------------

HfModel load_hf_model(const std::string& dir, bool training_state) {
  NN_CHECK(fs::is_directory(dir), "model directory " << dir << " does not exist (or is not a directory)");
  HfModel out;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  NN_CHECK(fs::exists(cfg_path), "model directory " << dir << " has no config.json");
  const std::string cfg_text = read_text(cfg_path, "model config");
  const GPTConfig c = config_from_hf_json(cfg_text, cfg_path, &out.architecture);

  // every tensor checked against the config before the model is allocated
  std::map<std::string, Loaded> tensors = read_tensors(dir, c);
  const std::vector<ParamSlice> slices = param_slices(c);
  std::set<std::string> used;
  for (const ParamSlice& s : slices) {
    for (const Part& p : parts_of(s, c)) {
      const auto it = tensors.find(p.name);
      NN_CHECK(it != tensors.end(), "model directory " << dir << ": tensor '" << p.name << "' is missing (a "
                                                       << out.architecture << " with this config.json has it)");
      const std::vector<int64_t> want = hf_shape(p, s);
      NN_CHECK(it->second.t.shape == want, it->second.file << ": tensor '" << p.name << "' has shape "
                                                           << shape_str(it->second.t.shape) << ", but config.json says "
                                                           << shape_str(want) << " (" << cfg_path << ")");
      used.insert(p.name);
    }
  }
  std::set<std::string> dtypes;
  for (const auto& [name, l] : tensors) {
    NN_CHECK(used.count(name) == 1 || ignored(name, c),
             l.file << ": unexpected tensor '" << name << "' (shape " << shape_str(l.t.shape) << "): a "
                    << out.architecture << " with this config.json has no such tensor; is config.json the right one?");
    dtypes.insert(l.t.dtype);
  }
  out.dtype = dtypes.size() == 1 ? *dtypes.begin() : "mixed";

  // copy in: each part's rows into its slice, transposed back from Conv1D's (in, out)
  out.model = gpt_create(c, host_memory(), training_state);
  float* params = out.model.params_memory.data();
  for (const ParamSlice& s : slices) {
    float* dst = params + s.offset;
    const int64_t cols = s.shape.size() == 1 ? 1 : s.shape[1];
    int64_t row0 = 0;
    for (const Part& p : parts_of(s, c)) {
      std::vector<float>& src = tensors.at(p.name).t.data;
      if (!p.transpose) {
        std::copy(src.begin(), src.end(), dst + row0 * cols);
      } else {
        for (int64_t i = 0; i < cols; ++i) {     // src (cols, rows)
          for (int64_t r = 0; r < p.rows; ++r) {  // dst (rows, cols)
            dst[(row0 + r) * cols + i] = src[static_cast<size_t>(i * p.rows + r)];
          }
        }
      }
      row0 += p.rows;
      std::vector<float>().swap(src);  // free as we go: a hub model is large
    }
  }

  // tokenizer.json (byte-level BPE only: io/bpe.h says what it refuses)
  const std::string tok_path = (fs::path(dir) / "tokenizer.json").string();
  if (fs::exists(tok_path)) {
    try {
      out.tokenizer = nn::BpeTokenizer::load_hf_json(tok_path);
      if (out.tokenizer->vocab_size() > c.vocab_size) {
        out.tokenizer_note = tok_path + " has " + std::to_string(out.tokenizer->vocab_size()) +
                             " tokens, more than the model's vocab_size " + std::to_string(c.vocab_size);
        out.tokenizer.reset();
      }
    } catch (const nn::Error& e) {
      out.tokenizer_note = std::string("tokenizer.json is not one nnlab reads: ") + e.what();
    }
  } else {
    out.tokenizer_note = "no tokenizer.json in " + dir + " (give token ids instead)";
  }

  // bos/eos and the sampling defaults: generation_config.json, else config.json's ids
  const json cj = parse_json(cfg_text, cfg_path);
  if (cj.contains("bos_token_id")) out.bos_id = first_id(cj["bos_token_id"]);
  if (cj.contains("eos_token_id")) out.eos_id = first_id(cj["eos_token_id"]);
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_path)) {
    const json g = parse_json(read_text(gen_path, "generation config"), gen_path);
    NN_CHECK(g.is_object(), gen_path << " is not a JSON object");
    if (g.contains("bos_token_id")) out.bos_id = first_id(g["bos_token_id"]);
    if (g.contains("eos_token_id")) out.eos_id = first_id(g["eos_token_id"]);
    if (g.contains("temperature") && g["temperature"].is_number()) out.temperature = g["temperature"].get<float>();
    if (g.contains("top_p") && g["top_p"].is_number()) out.top_p = g["top_p"].get<float>();
    if (g.contains("top_k") && g["top_k"].is_number_integer()) out.top_k = g["top_k"].get<int>();
    // do_sample false (said, not defaulted): the model's authors ask for greedy decoding
    if (g.contains("do_sample") && g["do_sample"].is_boolean() && !g["do_sample"].get<bool>()) out.temperature = 0.0f;
  }
  if (out.bos_id >= c.vocab_size) out.bos_id = -1;
  if (out.eos_id >= c.vocab_size) out.eos_id = -1;
  return out;
}

// ---- saving -----------------------------------------------------------------------------------

void save_hf_model(const GPT& model, const std::string& dir, const nn::BpeTokenizer* tokenizer) {
  const GPTConfig& c = model.config;
  validate(c);
  if (tokenizer != nullptr) {
    NN_CHECK(tokenizer->vocab_size() == c.vocab_size, "save_hf_model: the tokenizer has "
                                                          << tokenizer->vocab_size() << " tokens, the model's vocabulary "
                                                          << c.vocab_size);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  NN_CHECK(!ec && fs::is_directory(dir), "cannot create model directory " << dir << ": " << ec.message());

  std::vector<float> host(static_cast<size_t>(model.num_params));
  model.params_memory.download(host.data(), host.size());
  std::map<std::string, const ParamSlice*> have;
  for (const ParamSlice& s : model.slices) have[s.name] = &s;

  // GPT2LMHeadModel always has biases: a model without writes zeros (the same function)
  GPTConfig full = c;
  if (c.arch == Arch::gpt2) full.bias = true;
  std::vector<std::vector<float>> store;
  std::vector<nn::TensorRef> refs;
  for (const ParamSlice& s : param_slices(full)) {
    if (s.name == "lm_head.weight" && c.tie_embeddings) continue;  // as save_pretrained: the head is wte
    const auto it = have.find(s.name);
    const float* src = it != have.end() ? host.data() + it->second->offset : nullptr;
    const int64_t cols = s.shape.size() == 1 ? 1 : s.shape[1];
    int64_t row0 = 0;
    for (const Part& p : parts_of(s, full)) {
      std::vector<float> t(static_cast<size_t>(p.rows * cols), 0.0f);
      if (src != nullptr) {
        for (int64_t r = 0; r < p.rows; ++r) {
          for (int64_t i = 0; i < cols; ++i) {
            const float v = src[(row0 + r) * cols + i];
            t[static_cast<size_t>(p.transpose ? i * p.rows + r : r * cols + i)] = v;
          }
        }
      }
      store.push_back(std::move(t));
      refs.push_back({p.name, hf_shape(p, s), store.back().data()});
      row0 += p.rows;
    }
  }
  // transformers reads a safetensors file only when its metadata says the format
  nn::save_safetensors((fs::path(dir) / "model.safetensors").string(), refs, {{"format", "pt"}});

  int bos = -1, eos = -1;
  if (tokenizer != nullptr && !tokenizer->special_ids().empty()) bos = eos = tokenizer->special_ids().front();
  write_text((fs::path(dir) / "config.json").string(), hf_config_json(c, bos, eos));
  ojson g;
  g["_from_model_config"] = true;
  g["bos_token_id"] = bos >= 0 ? ojson(bos) : ojson(nullptr);
  g["eos_token_id"] = eos >= 0 ? ojson(eos) : ojson(nullptr);
  g["transformers_version"] = "4.48.3";
  write_text((fs::path(dir) / "generation_config.json").string(), g.dump(2) + "\n");
  if (tokenizer != nullptr) tokenizer->save_hf_json((fs::path(dir) / "tokenizer.json").string());
}

}  // namespace gpt
