// gpt/hf_cli.cpp: `nnlab generate`, `nnlab perplexity`, `nnlab export-hf` (see gpt/hf_cli.h).
#include "gpt/hf_cli.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

#include "gpt/backend.h"
#include "gpt/hf.h"
#include "gpt/infer.h"
#include "gpt/train.h"
#include "io/file_io.h"
#include "io/safetensors.h"
#include "kernels/clock.h"
#include "nn/check.h"
#include "nn/cli_checks.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

// A model from either source, with how its text becomes ids and back.
struct AnyModel {
  GPT model;
  std::string description;  // one line: what was loaded
  std::optional<nn::BpeTokenizer> bpe;
  std::optional<nn::CharVocab> chars;
  std::string no_tokenizer;  // why text cannot be encoded ("" when it can)
  int eos_id = -1;
  float temperature = 1.0f, top_p = 1.0f;
  int top_k = 0;
  double load_seconds = 0.0;

  std::vector<int32_t> encode(const std::string& text) const {
    if (bpe) return bpe->encode(text);
    if (chars) return chars->encode(text);
    NN_CHECK(false, "cannot turn text into tokens: " << no_tokenizer << "; give --prompt-ids");
    return {};
  }
  bool can_decode() const { return bpe.has_value() || chars.has_value(); }
  std::string decode(const std::vector<int32_t>& ids) const {
    return bpe ? bpe->decode(ids) : chars->decode(ids);
  }
  // the bytes token `id` stands for (bits per byte)
  size_t bytes_of(int32_t id) const { return bpe ? bpe->vocab()[static_cast<size_t>(id)].size() : 1; }
};

// A Hugging Face directory, else an nnlab checkpoint file.
AnyModel load_any(const std::string& path) {
  AnyModel m;
  const double t0 = kernels::now_seconds();
  if (fs::is_directory(path)) {
    HfModel hf = load_hf_model(path, false);
    m.model = std::move(hf.model);
    m.bpe = std::move(hf.tokenizer);
    m.no_tokenizer = hf.tokenizer_note;
    m.eos_id = hf.eos_id;
    m.temperature = hf.temperature;
    m.top_p = hf.top_p;
    m.top_k = hf.top_k;
    std::ostringstream os;
    os << path << ": " << hf.architecture << " (" << hf.dtype << "), " << arch_name(m.model.config.arch) << " "
       << m.model.config.n_layer << " layers, n_embd " << m.model.config.n_embd << ", " << m.model.config.n_head
       << " heads (" << kv_heads(m.model.config) << " kv), vocab " << m.model.config.vocab_size << ", context "
       << m.model.config.block_size << ", " << std::fixed << std::setprecision(1)
       << static_cast<double>(m.model.num_params) / 1e6 << "M parameters";
    m.description = os.str();
  } else {
    LoadedCheckpoint ck = load_checkpoint(path);
    m.model = std::move(ck.model);
    m.chars = ck.vocab;
    std::ostringstream os;
    os << path << ": nnlab checkpoint (step " << ck.state.step << "), " << arch_name(m.model.config.arch) << " "
       << m.model.config.n_layer << " layers, n_embd " << m.model.config.n_embd << ", character vocabulary of "
       << ck.vocab.size() << ", " << std::fixed << std::setprecision(2)
       << static_cast<double>(m.model.num_params) / 1e6 << "M parameters";
    m.description = os.str();
  }
  m.load_seconds = kernels::now_seconds() - t0;
  return m;
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string tok;
  std::istringstream is(s);
  while (is >> tok) {
    std::istringstream part(tok);
    std::string one;
    while (std::getline(part, one, ',')) {
      if (one.empty()) continue;
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(one, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      NN_CHECK(used == one.size() && v >= 0 && v < (1LL << 31), "--prompt-ids: '" << one << "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
  }
  return ids;
}

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
}

// The GPT the no-cache path runs: the fp32 model, or its weights as `format` stores them.
GPT model_for(const GPT& model, kernels::WeightFormat f, Memory& memory) {
  GPT host = f == kernels::WeightFormat::f32 ? GPT(model) : dequantized_copy(model, f);
  return &memory == &gpt_memory(host) ? std::move(host) : gpt_move_to(host, memory);
}

}  // namespace

PerplexityResult window_perplexity(Decoder& dec, const std::vector<int32_t>& ids, int context, int stride,
                                   const std::function<size_t(int32_t)>& bytes_of) {
  const GPTConfig& c = dec.model().config;
  const int n = static_cast<int>(ids.size()), V = c.vocab_size;
  NN_CHECK(n >= 2, "perplexity needs at least 2 tokens, got " << n);
  NN_CHECK(context >= 2 && context <= c.block_size,
           "perplexity: the context " << context << " must be in [2, " << c.block_size << "] (the model's)");
  NN_CHECK(stride >= 1 && stride <= context, "perplexity: the stride " << stride << " must be in [1, " << context << "]");
  // Windows [begin, end) of up to `context` tokens, begin moving by stride; a window scores
  // the targets after the previous window's end (so each token once), each predicted from the
  // tokens before it in the window (Hugging Face's perplexity recipe).
  PerplexityResult r;
  double nll = 0.0;
  int prev_end = 1;  // token 0 has nothing before it: the first target is token 1
  const double t0 = kernels::now_seconds();
  for (int begin = 0; prev_end < n; begin += stride) {
    const int end = std::min(begin + context, n);
    dec.reset();
    const std::vector<float>& logits = dec.step(ids.data() + begin, 1, end - begin);
    for (int t = std::max(prev_end, begin + 1); t < end; ++t) {
      const float* row = logits.data() + static_cast<int64_t>(t - 1 - begin) * V;  // predicts token t
      double mx = row[0];
      for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double sum = 0.0;
      for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      nll += std::log(sum) + mx - static_cast<double>(row[ids[static_cast<size_t>(t)]]);
      ++r.scored;
      r.bytes += bytes_of ? static_cast<int64_t>(bytes_of(ids[static_cast<size_t>(t)])) : 1;
    }
    prev_end = std::max(prev_end, end);
  }
  r.seconds = kernels::now_seconds() - t0;
  NN_CHECK(std::isfinite(nll), "perplexity: the loss is not finite (the model's logits are not)");
  r.mean_nll = nll / static_cast<double>(r.scored);
  r.perplexity = std::exp(r.mean_nll);
  r.bits_per_byte = nll / std::log(2.0) / static_cast<double>(std::max<int64_t>(r.bytes, 1));
  return r;
}

// ---- generate ---------------------------------------------------------------------------------

void add_generate_options(CLI::App& app, GenerateCliOptions& o) {
  app.add_option("--model", o.model, "A Hugging Face model directory (config.json, model.safetensors, tokenizer.json) "
                                     "or an nnlab checkpoint file")->required();
  app.add_option("--prompt", o.prompt, "The text to continue (through the model's tokenizer)");
  app.add_option("--prompt-ids", o.prompt_ids, "Token ids to continue instead of text: \"1 2 3\" or \"1,2,3\"");
  app.add_option("--tokens", o.tokens, "How many tokens to generate")->capture_default_str()->check(CLI::Range(0, 100000000));
  o.temperature_opt = app.add_option("--temperature", o.temperature, "Sampling temperature; 0: greedy (default: the model's "
                                                 "generation_config.json, else 1)")
      ->check(nn::FiniteRange(0.0, 100.0));
  o.top_k_opt = app.add_option("--top-k", o.top_k, "Draw among the k most likely tokens only (0: all)")->check(CLI::Range(0, 1 << 30));
  o.top_p_opt = app.add_option("--top-p", o.top_p, "Nucleus sampling: the fewest most likely tokens whose probability reaches p "
                                     "(1: off)")
      ->check(nn::FiniteRange(1e-9, 1.0));
  app.add_option("--seed", o.seed, "The sampler's seed")->check(nn::Seed())->capture_default_str();
  app.add_option("--format", o.format, "Weights as: f32, bf16, int8 or int4 (lesson 10's packed formats)")
      ->check(CLI::IsMember({"f32", "fp32", "bf16", "int8", "int4"}))->capture_default_str();
  app.add_flag("--no-cache", o.no_cache, "No KV cache: a full forward over the context per token (slower)");
  app.add_flag("--ids", o.ids, "Print the generated token ids instead of text");
  app.add_flag("--no-eos", o.no_eos, "Do not stop at the model's end-of-sequence token");
  app.add_option("--backend", o.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default, all cores)")->check(nn::ThreadCount());
  // for the parity tests (tests/python/test_hf_parity.py): the prompt's logits, not in --help
  app.add_option("--dump-logits", o.dump_logits, "")->group("");
}

int run_generate(const GenerateCliOptions& o) {
  use_threads(o.threads);
  NN_CHECK(o.prompt.empty() || o.prompt_ids.empty(), "give --prompt or --prompt-ids, not both");
  const AnyModel m = load_any(o.model);
  std::cerr << m.description << " (loaded in " << fixed(m.load_seconds, 2) << " s)\n";
  std::vector<int32_t> prompt = o.prompt_ids.empty() ? m.encode(o.prompt.empty() ? "\n" : o.prompt) : parse_ids(o.prompt_ids);
  NN_CHECK(!prompt.empty(), "the prompt is empty: give --prompt or --prompt-ids");
  const GPTConfig& c = m.model.config;
  for (const int32_t id : prompt) {
    NN_CHECK(id >= 0 && id < c.vocab_size, "prompt token id " << id << " is outside the vocabulary [0, " << c.vocab_size << ")");
  }
  NN_CHECK(o.ids || m.can_decode(), "cannot print text: " << m.no_tokenizer << "; use --ids");

  GenerateOptions g;
  g.tokens = o.tokens;
  g.seed = o.seed;
  const auto given = [](const CLI::Option* opt) { return opt != nullptr && opt->count() > 0; };
  g.temperature = given(o.temperature_opt) ? o.temperature : m.temperature;
  g.top_k = given(o.top_k_opt) ? o.top_k : m.top_k;
  g.top_p = given(o.top_p_opt) ? o.top_p : m.top_p;
  g.eos_id = o.no_eos ? -1 : m.eos_id;
  const kernels::WeightFormat fmt = kernels::parse_format(o.format);
  auto be = make_backend(o.backend);

  std::vector<int32_t> out;
  GenerateStats st;
  if (o.no_cache) {
    NN_CHECK(o.dump_logits.empty(), "--dump-logits reads the cached decoder's logits: drop --no-cache");
    GPT run = model_for(m.model, fmt, be->memory());
    out = generate_without_cache(run, *be, prompt, g, &st);
  } else {
    const InferenceModel packed = pack_model(m.model, fmt, be->memory());
    Decoder dec(packed, *be);
    if (!o.dump_logits.empty()) {
      NN_CHECK(static_cast<int>(prompt.size()) <= c.block_size,
               "--dump-logits: the prompt's " << prompt.size() << " tokens exceed the context " << c.block_size);
      const std::vector<float>& logits = dec.step(prompt.data(), 1, static_cast<int>(prompt.size()));
      nn::save_safetensors(o.dump_logits, {{"logits", {static_cast<int64_t>(prompt.size()), c.vocab_size}, logits.data()}},
                           {}, nn::NonFinite::Allow);
    }
    out = generate(dec, prompt, g, &st);
  }
  if (o.ids) {
    for (size_t i = 0; i < out.size(); ++i) std::cout << (i ? " " : "") << out[i];
    std::cout << "\n";
  } else {
    std::cout << (o.prompt_ids.empty() ? o.prompt : m.decode(prompt)) << m.decode(out) << "\n";
  }
  std::cout.flush();
  NN_CHECK(std::cout.good(), "writing to standard output failed");
  std::cerr << "generated " << st.generated << " tokens (" << kernels::format_name(fmt) << ", "
            << (o.no_cache ? "no cache" : "KV cache") << ", " << be->name() << "): prompt " << prompt.size()
            << " tokens in " << fixed(st.prefill_seconds, 3) << " s, " << fixed(st.tokens_per_second(), 1)
            << " tokens/s\n";
  return 0;
}

// ---- perplexity -------------------------------------------------------------------------------

void add_perplexity_options(CLI::App& app, PerplexityCliOptions& o) {
  app.add_option("--model", o.model, "A Hugging Face model directory or an nnlab checkpoint file")->required();
  app.add_option("--text", o.text, "The text file to score")->required();
  app.add_option("--format", o.format, "Weights as: f32, bf16, int8 or int4")
      ->check(CLI::IsMember({"f32", "fp32", "bf16", "int8", "int4"}))->capture_default_str();
  app.add_option("--context", o.context, "Tokens per window (0: the model's context)")->check(CLI::Range(0, 1 << 30));
  app.add_option("--stride", o.stride, "Tokens each window moves by (0: the context: windows side by side)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--limit", o.limit, "Score only the first N tokens of the text (0: all)")->check(CLI::Range(0, 1 << 30));
  app.add_option("--backend", o.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default, all cores)")->check(nn::ThreadCount());
}

int run_perplexity(const PerplexityCliOptions& o) {
  use_threads(o.threads);
  const AnyModel m = load_any(o.model);
  std::cout << m.description << "\n";
  const std::vector<uint8_t> bytes = nn::read_file(o.text, "text", "check the path");
  std::vector<int32_t> ids = m.encode(std::string(bytes.begin(), bytes.end()));
  if (o.limit > 0 && static_cast<int>(ids.size()) > o.limit) ids.resize(static_cast<size_t>(o.limit));
  NN_CHECK(ids.size() >= 2, o.text << " holds " << ids.size() << " tokens: perplexity needs at least 2");
  const GPTConfig& c = m.model.config;
  const int ctx = o.context > 0 ? std::min(o.context, c.block_size) : c.block_size;
  const int stride = o.stride > 0 ? std::min(o.stride, ctx) : ctx;
  NN_CHECK(ctx >= 2, "--context must be at least 2 tokens");
  const kernels::WeightFormat fmt = kernels::parse_format(o.format);
  auto be = make_backend(o.backend);
  const InferenceModel packed = pack_model(m.model, fmt, be->memory());
  Decoder dec(packed, *be);

  const PerplexityResult r = window_perplexity(dec, ids, ctx, stride, [&m](int32_t id) { return m.bytes_of(id); });
  const int n = static_cast<int>(ids.size());
  std::cout << "text: " << o.text << ", " << n << " tokens, " << r.scored << " scored (" << r.bytes
            << " bytes), windows of " << ctx << " moved by " << stride << ", weights " << kernels::format_name(fmt) << "\n"
            << "loss " << fixed(r.mean_nll, 4) << " nats/token, perplexity " << fixed(r.perplexity, 3) << ", bits per byte "
            << fixed(r.bits_per_byte, 4) << "\n"
            << "scored in " << fixed(r.seconds, 2) << " s ("
            << fixed(r.seconds > 0 ? static_cast<double>(r.scored) / r.seconds : 0.0, 1) << " tokens/s, " << be->name()
            << ")\n";
  std::cout.flush();
  NN_CHECK(std::cout.good(), "writing to standard output failed");
  return 0;
}

// ---- export-hf --------------------------------------------------------------------------------

void add_export_hf_options(CLI::App& app, ExportHfCliOptions& o) {
  app.add_option("--checkpoint", o.checkpoint, "An nnlab checkpoint (gpt2 or llama arch)")->required();
  app.add_option("--out", o.out, "The Hugging Face directory to write (created)")->required();
  app.add_option("--tokenizer", o.tokenizer, "A tokenizer.json to include (its vocabulary must be the model's)");
}

int run_export_hf(const ExportHfCliOptions& o) {
  const double t0 = kernels::now_seconds();
  const LoadedCheckpoint ck = load_checkpoint(o.checkpoint);
  std::optional<nn::BpeTokenizer> tok;
  if (!o.tokenizer.empty()) tok = nn::BpeTokenizer::load_hf_json(o.tokenizer);
  save_hf_model(ck.model, o.out, tok ? &*tok : nullptr);
  std::cout << "export-hf: " << o.checkpoint << " (" << arch_name(ck.model.config.arch) << ", "
            << ck.model.num_params << " parameters) -> " << o.out
            << " (config.json, model.safetensors, generation_config.json"
            << (tok ? ", tokenizer.json" : "; no tokenizer.json: a character model's vocabulary is not a BPE, "
                                           "run it in transformers on ids")
            << ") in " << fixed(kernels::now_seconds() - t0, 2) << " s\n";
  return 0;
}

}  // namespace gpt
