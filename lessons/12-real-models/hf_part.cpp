// Lesson 12, part hf: a Hugging Face model directory in our kernels (see hf_part.h).
#include "lessons/12-real-models/hf_part.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "gpt/backend.h"
#include "gpt/hf.h"
#include "gpt/hf_cli.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "io/text.h"
#include "kernels/clock.h"
#include "kernels/harness.h"
#include "lessons/12-real-models/real_lesson.h"
#include "nn/check.h"

namespace lesson12 {

namespace fs = std::filesystem;

void add_hf_options(CLI::App& app, HfPartOptions& o) {
  const std::string g = "part hf";
  app.add_option("--model", o.model, "part hf: a Hugging Face model directory (default: random models of --hf-shapes)")
      ->group(g);
  app.add_option("--hf-shapes", o.shapes, "part hf: random models' shapes: gpt2, gpt2-medium, smollm-135m, tiny-gpt2, "
                                          "tiny-llama (comma-separated)")
      ->capture_default_str()->group(g);
  app.add_option("--hf-prompt", o.prompt, "part hf: the prompt to continue")->capture_default_str()->group(g);
  app.add_option("--hf-tokens", o.tokens, "part hf: tokens to generate (greedy)")->check(CLI::Range(1, 100000))
      ->capture_default_str()->group(g);
  app.add_option("--hf-eval-tokens", o.eval_tokens, "part hf: tokens of --data scored for perplexity")
      ->check(CLI::Range(2, 100000000))->capture_default_str()->group(g);
}

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) {
    if (!x.empty()) out.push_back(x);
  }
  return out;
}

int64_t dir_bytes(const std::string& dir) {
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
  }
  return n;
}

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
}

void print_mapping(const gpt::HfModel& h) {
  const gpt::GPTConfig& c = h.model.config;
  const bool llama = c.arch == gpt::Arch::llama;
  std::cout << "  config.json (" << h.architecture << ") -> GPTConfig:\n";
  const auto row = [](const char* hf, const char* ours, const std::string& v) {
    std::cout << "    " << std::left << std::setw(26) << hf << " -> " << std::setw(14) << ours << v << "\n";
  };
  row("vocab_size", "vocab_size", std::to_string(c.vocab_size));
  row(llama ? "max_position_embeddings" : "n_positions", "block_size", std::to_string(c.block_size));
  row(llama ? "num_hidden_layers" : "n_layer", "n_layer", std::to_string(c.n_layer));
  row(llama ? "hidden_size" : "n_embd", "n_embd", std::to_string(c.n_embd));
  row(llama ? "num_attention_heads" : "n_head", "n_head", std::to_string(c.n_head));
  if (llama) {
    row("num_key_value_heads", "n_kv_head", std::to_string(gpt::kv_heads(c)));
    row("intermediate_size", "ffn_hidden", std::to_string(gpt::mlp_hidden(c)));
    row("rope_theta", "rope_theta", fixed(c.rope_theta, 1));
    row("rms_norm_eps", "norm_eps", std::to_string(c.norm_eps));
    row("tie_word_embeddings", "tie_embeddings", c.tie_embeddings ? "true" : "false");
    std::cout << "    tensors: q_proj, k_proj, v_proj -> c_attn rows [q | k | v]; gate_proj, up_proj -> c_fc rows "
                 "[gate | up]; o_proj, down_proj -> the c_proj's\n";
  } else {
    row("(n_inner null)", "MLP width", std::to_string(gpt::mlp_hidden(c)) + " (4 n_embd)");
    std::cout << "    tensors: Conv1D weights stored (in, out), transposed to our (out, in); c_attn is [q | k | v]; "
                 "the head is wte\n";
  }
}

struct Row {
  std::string name, json;
};

Row run_one(const std::string& name, const std::string& dir, const gpt::GPT* written, double save_seconds,
            const nn::TextCorpus& corpus, const Options& opts) {
  const HfPartOptions& o = opts.hf;
  const int tokens = opts.quick ? std::min(o.tokens, 8) : o.tokens;
  const int eval_tokens = opts.quick ? std::min(o.eval_tokens, 200) : o.eval_tokens;
  const int64_t file_bytes = dir_bytes(dir);

  const double t0 = kernels::now_seconds();
  gpt::HfModel h = gpt::load_hf_model(dir);
  const double load_seconds = kernels::now_seconds() - t0;
  const gpt::GPTConfig& c = h.model.config;
  std::cout << "\n-- " << name << ": " << dir << "\n";
  print_mapping(h);
  std::cout << "  parameters: " << h.model.num_params << " (" << fixed(static_cast<double>(h.model.num_params) / 1e6, 1)
            << "M), stored as " << h.dtype << "; read " << fixed(static_cast<double>(file_bytes) / 1e6, 1) << " MB in "
            << fixed(load_seconds, 2) << " s\n";
  bool exact = true;
  if (written != nullptr) {
    exact = std::equal(written->params_memory.data(), written->params_memory.data() + written->num_params,
                       h.model.params_memory.data());
    std::cout << "  written in " << fixed(save_seconds, 2) << " s; read back: parameters "
              << (exact ? "identical" : "DIFFERENT") << "\n";
    NN_CHECK(exact, "the model read back differs from the one written: gpt/hf.cpp is broken");
  }

  // greedy continuation with the KV cache, fp32
  std::vector<int32_t> prompt;
  if (h.tokenizer) {
    prompt = h.tokenizer->encode(o.prompt);
  } else {
    for (unsigned char ch : o.prompt) prompt.push_back(static_cast<int32_t>(ch) % c.vocab_size);
  }
  if (static_cast<int>(prompt.size()) > c.block_size / 2) prompt.resize(static_cast<size_t>(c.block_size / 2));
  auto be = gpt::make_backend("cpu");
  const gpt::InferenceModel packed = gpt::pack_model(h.model, kernels::WeightFormat::f32, be->memory());
  gpt::Decoder dec(packed, *be);
  gpt::GenerateOptions g;
  g.tokens = tokens;
  g.temperature = 0.0f;
  gpt::GenerateStats st;
  const std::vector<int32_t> out = gpt::generate(dec, prompt, g, &st);
  if (h.tokenizer) {
    std::cout << "  greedy: \"" << o.prompt << "\" -> \"" << h.tokenizer->decode(out) << "\"\n";
  } else {
    std::cout << "  greedy (no tokenizer.json: ids of the prompt's bytes) ->";
    for (int32_t id : out) std::cout << " " << id;
    std::cout << "\n";
  }
  std::cout << "  decode: " << st.generated << " tokens at " << fixed(st.tokens_per_second(), 1)
            << " tokens/s (fp32, KV cache, batch 1; prompt of " << prompt.size() << " in "
            << fixed(st.prefill_seconds, 3) << " s)\n";

  // perplexity on the corpus: through the tokenizer, else bytes (a random model's plumbing check)
  std::vector<int32_t> ids;
  const std::string text = corpus.text.substr(0, static_cast<size_t>(eval_tokens) * 8);
  if (h.tokenizer) {
    ids = h.tokenizer->encode(text);
  } else {
    for (unsigned char ch : text) ids.push_back(static_cast<int32_t>(ch) % c.vocab_size);
  }
  if (static_cast<int>(ids.size()) > eval_tokens) ids.resize(static_cast<size_t>(eval_tokens));
  const int ctx = std::min(c.block_size, 1024);
  const gpt::PerplexityResult p = gpt::window_perplexity(
      dec, ids, std::min(ctx, static_cast<int>(ids.size())), std::min(ctx, static_cast<int>(ids.size())) / 2 + 1,
      [&h](int32_t id) { return h.tokenizer ? h.tokenizer->vocab()[static_cast<size_t>(id)].size() : size_t{1}; });
  std::cout << "  perplexity on " << corpus.path << ": " << fixed(p.perplexity, 2) << " over " << p.scored
            << " tokens, " << fixed(p.bits_per_byte, 3) << " bits per byte (" << fixed(p.seconds, 2) << " s)"
            << (h.tokenizer ? "" : "; random weights, bytes as tokens: about the vocabulary size is expected") << "\n";

  std::ostringstream js;
  js << "{\"name\": " << kernels::harness::json_string(name)
     << ", \"architecture\": " << kernels::harness::json_string(h.architecture)
     << ", \"arch\": " << kernels::harness::json_string(gpt::arch_name(c.arch))
     << ", \"dtype\": " << kernels::harness::json_string(h.dtype) << ", \"n_layer\": " << c.n_layer
     << ", \"n_embd\": " << c.n_embd << ", \"n_head\": " << c.n_head << ", \"n_kv_head\": " << gpt::kv_heads(c)
     << ", \"ffn_hidden\": " << gpt::mlp_hidden(c) << ", \"vocab_size\": " << c.vocab_size
     << ", \"block_size\": " << c.block_size << ", \"params\": " << h.model.num_params
     << ", \"file_bytes\": " << file_bytes << ", \"save_seconds\": " << (written ? jnum(save_seconds) : "null")
     << ", \"load_seconds\": " << jnum(load_seconds)
     << ", \"roundtrip_exact\": " << (written ? (exact ? "true" : "false") : "null")
     << ", \"has_tokenizer\": " << (h.tokenizer ? "true" : "false") << ", \"prompt_tokens\": " << prompt.size()
     << ", \"generated\": " << st.generated << ", \"decode_tokens_per_second\": " << jnum(st.tokens_per_second())
     << ", \"eval_tokens\": " << p.scored << ", \"perplexity\": " << jnum(p.perplexity)
     << ", \"bits_per_byte\": " << jnum(p.bits_per_byte) << ", \"eval_seconds\": " << jnum(p.seconds) << "}";
  return {name, js.str()};
}

}  // namespace

int run_hf_part(const Options& opts) {
  const HfPartOptions& o = opts.hf;
  std::cout << "== part hf: Hugging Face model directories in our kernels (gpt/hf.h)\n";
  const nn::TextCorpus corpus = nn::load_corpus(opts.data);
  std::cout << "data: " << corpus.description << "\n";
  std::vector<Row> rows;
  if (!o.model.empty()) {
    rows.push_back(run_one(fs::path(o.model).filename().string(), o.model, nullptr, 0.0, corpus, opts));
  } else {
    const std::vector<std::string> names = split(opts.quick ? "tiny-gpt2,tiny-llama" : o.shapes);
    std::cout << "no --model: random models of the shapes " << (opts.quick ? "tiny-gpt2,tiny-llama" : o.shapes)
              << ", each written as a Hugging Face directory (config.json, model.safetensors) and loaded back\n";
    const fs::path tmp = fs::temp_directory_path() / ("nnlab-lesson12-hf-" + std::to_string(::getpid()));
    for (const std::string& name : names) {
      const gpt::GPTConfig c = named_shape(name);  // speed_part.h: the one table of shapes
      gpt::GPT m = gpt::gpt_create(c, gpt::host_memory(), false);
      gpt::gpt_init_weights(m, opts.seed);
      const std::string dir = (tmp / name).string();
      const double t0 = kernels::now_seconds();
      gpt::save_hf_model(m, dir);
      const double save_seconds = kernels::now_seconds() - t0;
      try {
        rows.push_back(run_one(name, dir, &m, save_seconds, corpus, opts));
      } catch (...) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
        throw;
      }
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  std::ostringstream js;
  js << "{\"source\": \"" << (o.model.empty() ? "random" : "dir") << "\", \"models\": [";
  for (size_t i = 0; i < rows.size(); ++i) js << (i ? ", " : "") << rows[i].json;
  js << "]}";
  record_part("hf", js.str());
  return 0;
}

}  // namespace lesson12
