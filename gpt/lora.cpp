// gpt/lora.cpp: LoRA adapters (gpt/lora.h).
#include "gpt/lora.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <ostream>
#include <cmath>
#include <map>
#include <utility>
#include <sstream>

#include "io/safetensors.h"
#include "io/shape.h"
#include "kernels/matmul.h"
#include "nn/check.h"
#include "nn/rng.h"
#include "io/text.h"

namespace gpt {

namespace {

using i64 = int64_t;

constexpr Linear kLinears[4] = {Linear::qkv, Linear::attproj, Linear::fc, Linear::fcproj};

// A Linear layer's channels (in, out), as block_forward calls it.
void channels(const GPTConfig& c, Linear which, int& in, int& out) {
  switch (which) {
    case Linear::qkv: in = c.n_embd, out = qkv_channels(c); return;
    case Linear::attproj: in = c.n_embd, out = c.n_embd; return;
    case Linear::fc: in = c.n_embd, out = fc_channels(c); return;
    case Linear::fcproj: in = mlp_hidden(c), out = c.n_embd; return;
  }
}

void check_config(const LoraConfig& c) {
  NN_CHECK(c.rank >= 1, "LoRA: rank " << c.rank << " must be >= 1");
  NN_CHECK(std::isfinite(c.alpha) && c.alpha > 0.0f, "LoRA: alpha " << c.alpha << " must be finite and > 0");
  NN_CHECK(c.targets[0] || c.targets[1] || c.targets[2] || c.targets[3],
           "LoRA: no target (choose among qkv, attproj, fc, fcproj)");
}

std::string tensor_name(const LoraSite& s, const char* which) {
  return "h." + std::to_string(s.layer) + "." + linear_name(s.which) + "." + which;
}

// The base's shape as the adapter file records it: what its tensors' shapes depend on, in the
// order load_lora checks them (the first difference named is the most telling one).
std::vector<std::pair<std::string, std::string>> base_keys(const GPTConfig& c) {
  return {{"lora.base.arch", arch_name(c.arch)},
          {"lora.base.n_layer", std::to_string(c.n_layer)},
          {"lora.base.n_embd", std::to_string(c.n_embd)},
          {"lora.base.qkv", std::to_string(qkv_channels(c))},
          {"lora.base.fc", std::to_string(fc_channels(c))},
          {"lora.base.hidden", std::to_string(mlp_hidden(c))}};
}

}  // namespace

const char* linear_name(Linear which) {
  switch (which) {
    case Linear::qkv: return "qkv";
    case Linear::attproj: return "attproj";
    case Linear::fc: return "fc";
    case Linear::fcproj: return "fcproj";
  }
  return "?";
}

void parse_lora_targets(const std::string& s, bool targets[4]) {
  for (int i = 0; i < 4; ++i) targets[i] = false;
  std::stringstream ss(s);
  std::string item;
  bool any = false;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    bool found = false;
    for (int i = 0; i < 4; ++i) {
      if (item == "all" || item == linear_name(kLinears[i])) {
        targets[i] = true;
        found = true;
      }
    }
    NN_CHECK(found, "LoRA: unknown target '" << item << "' (choose among qkv, attproj, fc, fcproj, or all)");
    any = true;
  }
  NN_CHECK(any, "LoRA: no target in '" << s << "' (choose among qkv, attproj, fc, fcproj, or all)");
}

std::string lora_targets_string(const bool targets[4]) {
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if (!targets[i]) continue;
    if (!out.empty()) out += ",";
    out += linear_name(kLinears[i]);
  }
  return out;
}

int LoraAdapters::site_index(Linear which, int l) const {
  // sites are layer by layer, each layer's targets in Linear order: a short scan
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].layer == l && sites[i].which == which) return static_cast<int>(i);
  }
  return -1;
}

const LoraSite* LoraAdapters::site(Linear which, int l) const {
  const int i = site_index(which, l);
  return i < 0 ? nullptr : &sites[static_cast<size_t>(i)];
}

int64_t lora_num_parameters(const GPTConfig& base, const LoraConfig& c) {
  i64 n = 0;
  for (int l = 0; l < base.n_layer; ++l) {
    for (int t = 0; t < 4; ++t) {
      if (!c.targets[t]) continue;
      int in = 0, out = 0;
      channels(base, kLinears[t], in, out);
      n += static_cast<i64>(c.rank) * (in + out);
    }
  }
  return n;
}

LoraAdapters lora_create(const GPTConfig& base, const LoraConfig& c, Memory& memory) {
  validate(base);
  check_config(c);
  LoraAdapters ad;
  ad.config = c;
  ad.base = base;
  i64 off = 0;
  for (int l = 0; l < base.n_layer; ++l) {
    for (int t = 0; t < 4; ++t) {
      if (!c.targets[t]) continue;
      LoraSite s;
      s.which = kLinears[t];
      s.layer = l;
      channels(base, s.which, s.in, s.out);
      s.a = off;
      off += static_cast<i64>(c.rank) * s.in;
      s.b = off;
      off += static_cast<i64>(s.out) * c.rank;
      ad.sites.push_back(s);
    }
  }
  ad.num_params = off;
  const auto n = static_cast<size_t>(off);
  ad.params = make_array<float>(memory, n);
  ad.grads = make_array<float>(memory, n);
  ad.m = make_array<float>(memory, n);
  ad.v = make_array<float>(memory, n);
  ad.hidden = make_array<float>(memory, 0);
  ad.scratch = make_array<float>(memory, 0);
  return ad;
}

void lora_init(LoraAdapters& ad, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<float> host(static_cast<size_t>(ad.num_params), 0.0f);  // B = 0
  for (const LoraSite& s : ad.sites) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(s.in));
    float* a = host.data() + s.a;
    for (i64 i = 0; i < static_cast<i64>(ad.config.rank) * s.in; ++i) a[i] = rng.uniform(-bound, bound);
  }
  ad.params.upload(host.data(), host.size());
  ad.grads.zero();
  ad.m.zero();
  ad.v.zero();
  ad.adam_t = 0;
}

namespace {

// The adapters fit the model: the shape they were made for, in the model's memory.
void check_fits(const LoraAdapters& ad, const GPT& model) {
  const GPTConfig& a = ad.base;
  const GPTConfig& b = model.config;
  NN_CHECK(a.arch == b.arch && a.n_layer == b.n_layer && a.n_embd == b.n_embd && qkv_channels(a) == qkv_channels(b) &&
               fc_channels(a) == fc_channels(b) && mlp_hidden(a) == mlp_hidden(b),
           "LoRA: the adapters were made for another model shape (" << arch_name(a.arch) << " L=" << a.n_layer
                                                                    << " C=" << a.n_embd << ", the model is "
                                                                    << arch_name(b.arch) << " L=" << b.n_layer
                                                                    << " C=" << b.n_embd << ")");
  NN_CHECK(&ad.params.memory() == &gpt_memory(model),
           "LoRA: the adapters are in " << ad.params.memory().where() << ", the model in "
                                        << gpt_memory(model).where());
}

}  // namespace

void lora_attach(GPT& model, LoraAdapters* ad) {
  if (ad != nullptr) check_fits(*ad, model);
  model.lora = ad;
}

// ---- the hooks ----------------------------------------------------------------------------

void lora_linear_forward(LoraAdapters& ad, Backend& be, float* out, const float* x, const LinearLayer& w, int N) {
  const int i = ad.site_index(w.which, w.layer);
  if (i < 0) return;
  const LoraSite& s = ad.sites[static_cast<size_t>(i)];
  const int r = ad.config.rank;
  NN_CHECK(s.in == w.in && s.out == w.out, "LoRA: site " << linear_name(s.which) << " of layer " << s.layer
                                                         << " is (" << s.out << ", " << s.in << "), the layer ("
                                                         << w.out << ", " << w.in << ")");
  if (N > ad.N_alloc) {
    // the first site of a forward at a larger N: every site's h and the scratch regrow
    // (their old contents belong to an earlier forward)
    int max_io = 0;
    for (const LoraSite& t : ad.sites) max_io = std::max({max_io, t.in, t.out});
    Memory& mem = ad.params.memory();
    ad.hidden = make_array<float>(mem, ad.sites.size() * static_cast<size_t>(N) * r);
    ad.scratch = make_array<float>(mem, static_cast<size_t>(N) * (r + max_io));
    ad.N_alloc = N;
  }
  float* h = ad.hidden.data() + static_cast<i64>(i) * ad.N_alloc * r;
  float* u = ad.scratch.data();  // (N, out)
  const float* A = ad.params.data() + s.a;
  const float* B = ad.params.data() + s.b;
  const i64 Nr = static_cast<i64>(N) * r, No = static_cast<i64>(N) * s.out;
  be.matmul_forward(h, x, A, nullptr, N, s.in, r);      // h = x A^T          (N, r)
  be.scale(h, ad.config.scale(), Nr);                   // h *= alpha / r (kept: dB = dy^T h)
  be.matmul_forward(u, h, B, nullptr, N, r, s.out);     // u = h B^T          (N, out)
  be.residual_forward(out, out, u, No);                 // y += u (u = 0 exactly while B = 0)
}

void lora_linear_backward(LoraAdapters& ad, Backend& be, float* dx, const float* dout, const float* x, Linear which,
                          int layer, int N) {
  const int i = ad.site_index(which, layer);
  if (i < 0) return;
  const LoraSite& s = ad.sites[static_cast<size_t>(i)];
  const int r = ad.config.rank;
  NN_CHECK(N <= ad.N_alloc, "LoRA backward: no forward at N=" << N);
  const float* h = ad.hidden.data() + static_cast<i64>(i) * ad.N_alloc * r;
  float* dh = ad.scratch.data();                             // (N, r)
  float* dxa = ad.scratch.data() + static_cast<i64>(N) * r;  // (N, in)
  const float* A = ad.params.data() + s.a;
  const float* B = ad.params.data() + s.b;
  float* dA = ad.grads.data() + s.a;
  float* dB = ad.grads.data() + s.b;
  // y = h B^T: dB += dy^T h, dh = dy B; h = s x A^T: dA += (s dh)^T x, dx += (s dh) A
  be.matmul_backward(dh, dB, nullptr, dout, h, B, N, r, s.out);
  be.scale(dh, ad.config.scale(), static_cast<i64>(N) * r);
  be.matmul_backward(dxa, dA, nullptr, dh, x, A, N, s.in, r);
  be.residual_forward(dx, dx, dxa, static_cast<i64>(N) * s.in);
}

// ---- the step ------------------------------------------------------------------------------

StepResult lora_train_step(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                           const StepOptions& o) {
  NN_CHECK(model.lora != nullptr, "lora_train_step: no adapters attached (lora_attach)");
  NN_CHECK(!micro.empty(), "lora_train_step: no micro-batch");
  LoraAdapters& ad = *model.lora;
  StepResult r;
  ad.grads.zero();
  r.loss = accumulate_gradients(model, be, micro, B, T, o);  // the adapters' gradients (the base is frozen)
  // the adapters' gradient norm, clipped as gpt_clip_grad_norm clips the model's
  r.grad_norm = clip_grad_norm(be, ad.grads.data(), ad.num_params, o.grad_clip, "the adapters' gradient norm");
  ad.adam_t += 1;
  be.adamw_update(ad.params.data(), ad.grads.data(), ad.m.data(), ad.v.data(), ad.num_params, o.lr, o.adamw.beta1,
                  o.adamw.beta2, o.adamw.eps, o.adamw.weight_decay, ad.adam_t);
  return r;
}

// ---- files and merging -----------------------------------------------------------------------

void save_lora(const std::string& path, const LoraAdapters& ad) {
  const std::vector<float> host = ad.params.to_vector();
  std::vector<nn::TensorRef> tensors;
  const int r = ad.config.rank;
  for (const LoraSite& s : ad.sites) {
    tensors.push_back({tensor_name(s, "lora_A"), {r, s.in}, host.data() + s.a});
    tensors.push_back({tensor_name(s, "lora_B"), {s.out, r}, host.data() + s.b});
  }
  const auto keys = base_keys(ad.base);
  std::map<std::string, std::string> meta(keys.begin(), keys.end());
  meta["format"] = "nnlab-lora/1";
  meta["lora.rank"] = std::to_string(r);
  std::ostringstream alpha;
  alpha.precision(9);
  alpha << ad.config.alpha;
  meta["lora.alpha"] = alpha.str();
  meta["lora.targets"] = lora_targets_string(ad.config.targets);
  nn::save_safetensors(path, tensors, meta);
}

LoraAdapters load_lora(const std::string& path, const GPTConfig& base, Memory& memory) {
  const nn::SafetensorsFile f = nn::read_safetensors(path);  // NaN / infinity refused there, named
  auto get = [&](const std::string& key) -> const std::string& {
    auto it = f.metadata.find(key);
    NN_CHECK(it != f.metadata.end(), path << ": not a LoRA adapter file (no metadata key '" << key << "')");
    return it->second;
  };
  NN_CHECK(get("format") == "nnlab-lora/1", path << ": format '" << get("format") << "' is not nnlab-lora/1");
  for (const auto& [key, want] : base_keys(base)) {
    NN_CHECK(get(key) == want, path << ": the adapters were made for a base with " << key.substr(10) << " = "
                                    << get(key) << ", this model has " << want);
  }
  LoraConfig c;
  try {
    c.rank = std::stoi(get("lora.rank"));
    c.alpha = std::stof(get("lora.alpha"));
  } catch (const std::exception&) {
    NN_CHECK(false, path << ": lora.rank '" << get("lora.rank") << "' or lora.alpha '" << get("lora.alpha")
                         << "' is not a number");
  }
  parse_lora_targets(get("lora.targets"), c.targets);
  LoraAdapters ad = lora_create(base, c, memory);
  std::vector<float> host(static_cast<size_t>(ad.num_params));
  size_t used = 0;
  auto take = [&](const std::string& name, std::vector<int64_t> shape, int64_t offset) {
    auto it = f.tensors.find(name);
    NN_CHECK(it != f.tensors.end(), path << ": tensor " << name << " is missing (targets " << get("lora.targets")
                                         << ")");
    NN_CHECK(it->second.shape == shape, path << ": tensor " << name << " has shape " << nn::shape_str(it->second.shape)
                                             << ", rank " << c.rank << " needs " << nn::shape_str(shape)
                                             << " (a wrong rank, or a damaged file)");
    std::copy(it->second.data.begin(), it->second.data.end(), host.begin() + offset);
    ++used;
  };
  for (const LoraSite& s : ad.sites) {
    take(tensor_name(s, "lora_A"), {c.rank, s.in}, s.a);
    take(tensor_name(s, "lora_B"), {s.out, c.rank}, s.b);
  }
  NN_CHECK(used == f.tensors.size(), path << ": " << f.tensors.size() - used
                                          << " tensor(s) beyond the adapters its metadata lists");
  ad.params.upload(host.data(), host.size());
  return ad;
}

void lora_merge(GPT& model, const LoraAdapters& ad) {
  NN_CHECK(model.lora == nullptr, "lora_merge: detach the adapters first (lora_attach(model, nullptr)): an attached "
                                  "adapter would be added twice");
  NN_CHECK(gpt_memory(model).is_host(), "lora_merge: the model must be in host memory (gpt_move_to)");
  check_fits(ad, model);
  const std::vector<float> host = ad.params.to_vector();
  const int r = ad.config.rank;
  for (const LoraSite& s : ad.sites) {
    const ParameterTensors p = layer_params(model.params, model.config, s.layer);
    float* W = s.which == Linear::qkv       ? p.qkvw
               : s.which == Linear::attproj ? p.attprojw
               : s.which == Linear::fc      ? p.fcw
                                            : p.fcprojw;
    // W (out, in) += scale * B (out, r) A (r, in)
    kernels::sgemm(kernels::Trans::No, kernels::Trans::No, s.out, s.in, r, ad.config.scale(), host.data() + s.b, r,
                   host.data() + s.a, s.in, 1.0f, W, s.in);
  }
}

// ---- fine-tuning ---------------------------------------------------------------------------

namespace {

std::string read_domain(const std::string& data) {
  namespace fs = std::filesystem;
  const std::string path = data.empty() ? std::string(nn::kLicenceDir) : data;
  if (fs::is_directory(path)) return nn::find_corpus({}, path).text;  // every file, sorted, as one text
  return nn::load_corpus(path).text;
}

// The text as the base's ids; characters outside its vocabulary dropped (counted).
std::vector<int32_t> encode_known(const nn::CharVocab& vocab, const std::string& text, int64_t& dropped) {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  dropped = 0;
  for (unsigned char ch : text) {
    if (vocab.contains(ch)) {
      ids.push_back(vocab.ids[ch]);
    } else {
      ++dropped;
    }
  }
  return ids;
}

void split(const std::vector<int32_t>& ids, double val_fraction, std::vector<int32_t>& train,
           std::vector<int32_t>& val) {
  const auto n_val = static_cast<size_t>(static_cast<double>(ids.size()) * val_fraction);
  train.assign(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(n_val));
  val.assign(ids.end() - static_cast<std::ptrdiff_t>(n_val), ids.end());
}

}  // namespace

FinetuneResult finetune(const FinetuneOptions& o, std::ostream& os) {
  NN_CHECK(o.rank >= 0, "--lora-rank " << o.rank << " must be >= 0 (0: full fine-tuning)");
  NN_CHECK(o.iters >= 0 && o.batch_size >= 1 && o.eval_iters >= 1, "finetune: iters, batch size and eval iters");
  use_threads(o.threads);
  auto be = make_backend(o.backend);
  LoadedCheckpoint ck = load_checkpoint(o.init, be->memory());
  GPT& model = ck.model;
  const GPTConfig& c = model.config;
  const int B = o.batch_size, T = c.block_size;
  FinetuneResult r;

  const std::string text = read_domain(o.data);
  int64_t dropped = 0;
  const std::vector<int32_t> ids = encode_known(ck.vocab, text, dropped);
  r.dropped = text.empty() ? 0.0 : static_cast<double>(dropped) / static_cast<double>(text.size());
  std::vector<int32_t> train_ids, val_ids, old_train, old_val;
  split(ids, o.val_fraction, train_ids, val_ids);
  NN_CHECK(val_ids.size() > static_cast<size_t>(T) && train_ids.size() > static_cast<size_t>(T),
           "finetune: the new text has too few known characters (" << ids.size() << ") for context " << T);
  const bool old = !o.old_data.empty();
  if (old) {
    int64_t d = 0;
    split(encode_known(ck.vocab, read_domain(o.old_data), d), o.val_fraction, old_train, old_val);
  }
  auto eval_all = [&](float& val, float& old_val_loss) {
    val = evaluate(model, *be, val_ids, B, T, o.eval_iters, o.seed, 3);
    old_val_loss = old ? evaluate(model, *be, old_val, B, T, o.eval_iters, o.seed, 3)
                       : std::numeric_limits<float>::quiet_NaN();
  };
  eval_all(r.val_before, r.old_before);

  LoraAdapters ad;
  if (o.rank > 0) {
    LoraConfig lc;
    lc.rank = o.rank;
    lc.alpha = o.alpha;
    parse_lora_targets(o.targets, lc.targets);
    ad = lora_create(c, lc, be->memory());
    lora_init(ad, o.seed);
    lora_attach(model, &ad);
    r.trainable_params = ad.num_params;
  } else {
    // full fine-tuning starts AdamW afresh: the base's moments belong to its own run
    model.m_memory.zero();
    model.v_memory.zero();
    model.adam_t = 0;
    r.trainable_params = model.num_params;
  }
  r.optimizer_bytes = 2 * r.trainable_params * static_cast<int64_t>(sizeof(float));
  r.gradient_bytes = r.trainable_params * static_cast<int64_t>(sizeof(float));
  if (!o.quiet) {
    os << (o.rank > 0 ? "LoRA rank " + std::to_string(o.rank) + " on " + o.targets : std::string("full fine-tuning"))
       << ": " << r.trainable_params << " trainable parameters of " << model.num_params << ", AdamW state "
       << r.optimizer_bytes << " bytes; " << train_ids.size() << " training characters ("
       << std::fixed << std::setprecision(2) << 100.0 * r.dropped << "% of the text outside the base's vocabulary, "
       << "dropped); val loss before " << std::setprecision(4) << r.val_before << std::defaultfloat << "\n";
  }

  TrainOptions sched;  // the trainer's schedule (learning_rate) with these numbers
  sched.lr = o.lr;
  sched.min_lr = o.min_lr;
  sched.warmup_iters = o.warmup_iters;
  sched.max_iters = o.iters;
  sched.lr_decay_iters = o.iters;
  StepOptions so;
  so.grad_clip = o.grad_clip;
  so.adamw.weight_decay = o.weight_decay;
  std::vector<int32_t> x, y;
  std::vector<double> ms;
  for (int it = 0; it < o.iters; ++it) {
    get_batch(train_ids, B, T, o.seed, 1, static_cast<uint64_t>(it), x, y);
    so.lr = learning_rate(sched, it);
    const auto t0 = std::chrono::steady_clock::now();
    const StepResult sr = o.rank > 0 ? lora_train_step(model, *be, {{x.data(), y.data(), 0}}, B, T, so)
                                     : train_step(model, *be, {{x.data(), y.data(), 0}}, B, T, so);
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(dt);
    r.seconds += dt / 1000.0;
    r.losses.push_back(static_cast<float>(sr.loss));
  }
  r.steps = o.iters;
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    r.ms_per_step = ms[ms.size() / 2];
  }
  eval_all(r.val_after, r.old_after);
  if (!o.quiet) {
    os << r.steps << " steps, " << std::fixed << std::setprecision(2) << r.ms_per_step << " ms/step (median); val loss "
       << std::setprecision(4) << r.val_before << " -> " << r.val_after;
    if (old) os << "; old domain " << r.old_before << " -> " << r.old_after;
    os << std::defaultfloat << "\n";
  }
  if (!o.out.empty()) {
    if (o.rank > 0) {
      save_lora(o.out, ad);
    } else {
      ck.state.corpus = o.data.empty() ? std::string(nn::kLicenceDir) : o.data;
      save_checkpoint(o.out, model, ck.vocab, ck.state, /*with_optimizer=*/false);
    }
    if (!o.quiet) os << "wrote " << o.out << " (" << std::filesystem::file_size(o.out) << " bytes)\n";
  }
  lora_attach(model, nullptr);
  return r;
}

}  // namespace gpt
