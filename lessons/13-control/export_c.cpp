// Lesson 13: the C99 exporter (export_c.h). Reads top-down: the spec's checks, the C++
// reference, the C generator, the driver, compiling and measuring, and last the small NARX
// network the part exports until the foundation's plant model is used.
#include "lessons/13-control/export_c.h"

#include <dlfcn.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <filesystem>
#include <sstream>

#include "kernels/decode.h"
#include "nn/check.h"
#include "nn/optim.h"
#include "nn/rng.h"

#ifndef NNLAB_C_COMPILER
#define NNLAB_C_COMPILER ""
#endif

namespace lesson13 {

// ---- the spec ------------------------------------------------------------------------------
int64_t ExportSpec::params() const {
  int64_t n = 0;
  for (const ExportLayer& l : layers) n += static_cast<int64_t>(l.weight.size() + l.bias.size());
  return n;
}

void ExportSpec::validate() const {
  NN_CHECK(!name.empty() && (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_'),
           "export: name '" << name << "' must be a C identifier in lower case ([a-z_][a-z0-9_]*)");
  for (char ch : name) {
    const bool ok = std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_';
    NN_CHECK(ok, "export: name '" << name << "' must be a C identifier in lower case ([a-z_][a-z0-9_]*)");
  }
  NN_CHECK(!signals.empty(), "export: the spec has no input signals");
  NN_CHECK(history >= 1, "export: history must be >= 1, got " << history);
  NN_CHECK(!features.empty(), "export: the spec has no features");
  for (size_t i = 0; i < features.size(); ++i) {
    const ExportFeature& f = features[i];
    NN_CHECK(f.signal >= 0 && f.signal < static_cast<int>(signals.size()),
             "export: feature " << i << " reads signal " << f.signal << " of " << signals.size());
    NN_CHECK(f.lag >= 0 && f.lag < history, "export: feature " << i << " reads lag " << f.lag << " but the history keeps "
                                                                << history << " samples");
    NN_CHECK(std::isfinite(f.mean) && std::isfinite(f.std) && f.std != 0.0f, "export: feature " << i << "'s normalisation is not finite");
  }
  NN_CHECK(!layers.empty(), "export: the spec has no layers");
  int width = inputs();
  for (size_t l = 0; l < layers.size(); ++l) {
    const ExportLayer& L = layers[l];
    NN_CHECK(L.in == width, "export: layer " << l + 1 << " takes " << L.in << " inputs but gets " << width);
    NN_CHECK(L.weight.size() == static_cast<size_t>(L.in) * static_cast<size_t>(L.out) &&
                 L.bias.size() == static_cast<size_t>(L.out),
             "export: layer " << l + 1 << "'s arrays do not have its shape (" << L.out << ", " << L.in << ")");
    for (float w : L.weight) NN_CHECK(std::isfinite(w), "export: layer " << l + 1 << " has a weight that is not finite");
    for (float b : L.bias) NN_CHECK(std::isfinite(b), "export: layer " << l + 1 << " has a bias that is not finite");
    width = L.out;
  }
  NN_CHECK(width == 1, "export: the network must have one output, it has " << width);
  NN_CHECK(out_base_signal < static_cast<int>(signals.size()), "export: out_base_signal " << out_base_signal << " is not a signal");
  NN_CHECK(std::isfinite(out_mean) && std::isfinite(out_std), "export: the output scaling is not finite");
  if (pi.enabled) {
    NN_CHECK(signals.size() == 2 && pi.measured != pi.command && pi.measured >= 0 && pi.measured < 2 && pi.command >= 0 &&
                 pi.command < 2,
             "export: the PI feeds the model its measurement and its command: the spec needs exactly those two signals "
             "(it has " << signals.size() << "; measured " << pi.measured << ", command " << pi.command << ")");
    NN_CHECK(std::isfinite(pi.kp) && std::isfinite(pi.ki) && pi.kp >= 0.0f && pi.ki >= 0.0f && std::isfinite(pi.dt) &&
                 pi.dt > 0.0f && std::isfinite(pi.u_min) && std::isfinite(pi.u_max) && pi.u_min < pi.u_max,
             "export: the PI needs finite kp, ki >= 0, dt > 0 and u_min < u_max (got kp " << pi.kp << ", ki " << pi.ki
                 << ", dt " << pi.dt << ", u in [" << pi.u_min << ", " << pi.u_max << "])");
  }
}

void set_network(ExportSpec& spec, nn::Mlp& mlp) {
  spec.activation = mlp.config().activation;
  spec.layers.clear();
  for (nn::Linear& L : mlp.layers()) {
    ExportLayer e;
    e.in = L.in_features;
    e.out = L.out_features;
    e.weight.assign(L.weight.data(), L.weight.data() + L.weight.numel());
    e.bias.assign(L.bias.data(), L.bias.data() + L.bias.numel());
    spec.layers.push_back(std::move(e));
  }
}

ExportSpec spec_from_plant_model(const PlantModel& m, const std::string& name) {
  ExportSpec spec;
  spec.name = name;
  spec.description = "The lesson's plant model (lessons/13-control/plant_model.h), a NARX network: level(t+1) from the "
                     "last " + std::to_string(m.cfg.na) + " levels and " + std::to_string(m.cfg.nb) + " pump commands.";
  spec.signals = {"level y(t), m (measured)", "pump u(t) in [0, 1] (the command just sent)"};
  spec.output = "the predicted level y(t+1), m";
  spec.history = m.lag();
  for (int i = 0; i < m.cfg.na; ++i) spec.features.push_back({0, i, m.level_mean, m.level_std});
  for (int j = 0; j < m.cfg.nb; ++j) spec.features.push_back({1, j, m.pump_mean, m.pump_std});
  spec.out_mean = m.dlevel_mean;
  spec.out_std = m.dlevel_std;
  spec.out_base_signal = 0;
  set_network(spec, m.mlp);
  spec.validate();
  return spec;
}

ExportSpec dequantized_int8(const ExportSpec& spec) {
  ExportSpec out = spec;
  for (ExportLayer& L : out.layers) {
    // exactly the bytes the C file stores: kernels::pack_weights' int8 (weight_format.h)
    const kernels::PackedWeights p = kernels::pack_weights(L.weight.data(), L.out, L.in, kernels::WeightFormat::int8);
    kernels::unpack_weights(p.view(), L.weight.data());
  }
  return out;
}

// ---- the C++ reference ---------------------------------------------------------------------
namespace {

nn::Mlp make_mlp(const ExportSpec& spec) {
  spec.validate();
  nn::MlpConfig cfg;
  cfg.sizes = {spec.inputs()};
  for (const ExportLayer& L : spec.layers) cfg.sizes.push_back(L.out);
  cfg.activation = spec.activation;
  nn::Rng rng(1);  // any: every weight is overwritten below
  nn::Mlp mlp(cfg, rng);
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    nn::Linear& L = mlp.layers()[l];
    std::copy(spec.layers[l].weight.begin(), spec.layers[l].weight.end(), L.weight.data());
    std::copy(spec.layers[l].bias.begin(), spec.layers[l].bias.end(), L.bias.data());
  }
  return mlp;
}

}  // namespace

SpecRunner::SpecRunner(const ExportSpec& spec, kernels::WeightFormat format)
    : spec_(format == kernels::WeightFormat::int8 ? dequantized_int8(spec) : spec), mlp_(make_mlp(spec_)) {
  NN_CHECK(format == kernels::WeightFormat::f32 || format == kernels::WeightFormat::int8,
           "export: the C file stores fp32 or int8 weights, not " << kernels::format_name(format));
  hist_.assign(spec_.signals.size() * static_cast<size_t>(spec_.history), 0.0f);
  x_.assign(static_cast<size_t>(spec_.inputs()), 0.0f);
}

void SpecRunner::reset() {
  std::fill(hist_.begin(), hist_.end(), 0.0f);
  started_ = false;
}

float SpecRunner::step(const float* in) {
  const size_t H = static_cast<size_t>(spec_.history);
  for (size_t s = 0; s < spec_.signals.size(); ++s) {
    float* h = hist_.data() + s * H;  // h[0] newest
    if (!started_) {
      std::fill(h, h + H, in[s]);  // the missing past: the first sample repeated
    } else {
      for (size_t k = H - 1; k > 0; --k) h[k] = h[k - 1];
      h[0] = in[s];
    }
  }
  started_ = true;
  for (size_t i = 0; i < x_.size(); ++i) {
    const ExportFeature& f = spec_.features[i];
    x_[i] = (hist_[static_cast<size_t>(f.signal) * H + static_cast<size_t>(f.lag)] - f.mean) / f.std;
  }
  const float z = mlp_.forward(x_.data(), 1)[0];
  if (spec_.out_base_signal < 0) return spec_.out_mean + spec_.out_std * z;
  return hist_[static_cast<size_t>(spec_.out_base_signal) * H] + spec_.out_mean + spec_.out_std * z;
}

// ---- the generated C -----------------------------------------------------------------------
namespace {

// A float as a C literal that reads back to the same float ("%.9g" round-trips fp32).
std::string c_float(float v) {
  NN_CHECK(std::isfinite(v), "export: a value that is not finite cannot be written as a C constant");
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  std::string s(buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string upper(const std::string& s) {
  std::string u = s;
  for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return u;
}

// Writes `n` values, `per_line` to a line, indented.
template <class F>
void write_array(std::ostream& os, size_t n, size_t per_line, F value) {
  for (size_t i = 0; i < n; ++i) {
    if (i % per_line == 0) os << (i == 0 ? "    " : ",\n    ");
    else os << ", ";
    os << value(i);
  }
  os << "\n";
}

int max_width(const ExportSpec& spec) {
  int w = spec.inputs();
  for (const ExportLayer& L : spec.layers) w = std::max(w, L.out);
  return w;
}

}  // namespace

std::string generate_c(const ExportSpec& spec, kernels::WeightFormat format, const std::string& tolerance) {
  spec.validate();
  NN_CHECK(format == kernels::WeightFormat::f32 || format == kernels::WeightFormat::int8,
           "export: the C file stores fp32 or int8 weights, not " << kernels::format_name(format));
  const bool q8 = format == kernels::WeightFormat::int8;
  const std::string n = spec.name, N = upper(spec.name);
  const size_t L = spec.layers.size();
  std::ostringstream os;

  // -- the header comment: what it computes, its shapes, its memory, its tolerance
  std::string shapes = std::to_string(spec.inputs());
  for (const ExportLayer& l : spec.layers) shapes += " -> " + std::to_string(l.out);
  os << "/* " << n << ".c: generated by nnlab (lessons/13-control/export_c.cpp); regenerate, do not edit.\n"
     << " *\n";
  if (!spec.description.empty()) os << " * " << spec.description << "\n *\n";
  os << " * Every sample period call " << n << "_step(&state, in) once with\n";
  for (size_t s = 0; s < spec.signals.size(); ++s) os << " *   in[" << s << "] = " << spec.signals[s] << "\n";
  os << " * It returns " << (spec.output.empty() ? "the network's output" : spec.output) << ":\n"
     << " *   x_i = (hist[signal_i][lag_i] - mean_i) / std_i       hist[s][0]: the newest sample of in[s]\n"
     << " *   h   = " << nn::activation_name(spec.activation) << "(W h + b) per hidden layer, z = W h + b last\n"
     << " *   y   = ";
  if (spec.out_base_signal >= 0) os << "hist[" << spec.out_base_signal << "][0] + ";
  os << c_float(spec.out_mean) << " + " << c_float(spec.out_std) << " * z";
  if (spec.out_base_signal >= 0) os << "   (the network predicts the change)";
  os << "\n"
     << " * Before " << spec.history << " samples have arrived the missing past is the first sample repeated.\n"
     << " *\n";
  if (spec.pi.enabled) {
    const ExportPi& pi = spec.pi;
    os << " * The controller: call " << n << "_control_init(&state, u0) once (u0: the command at rest, the PI's\n"
       << " * integral), then every period u = " << n << "_control(&state, setpoint, measured, &residual),\n"
       << " * measured = "
       << spec.signals[static_cast<size_t>(pi.measured)] << ":\n"
       << " *   e = setpoint - measured;  I' = I + ki dt e;  I = I' unless kp e + I' is past a limit and e pushes further;\n"
       << " *   u = clamp(kp e + I, u_min, u_max)   kp " << c_float(pi.kp) << ", ki " << c_float(pi.ki) << ", dt "
       << c_float(pi.dt) << ", u in [" << c_float(pi.u_min) << ", " << c_float(pi.u_max) << "]\n"
       << " * then the model steps with in[" << pi.measured << "] = measured, in[" << pi.command << "] = u: its prediction of the next\n"
       << " * measurement (the soft sensor); residual = measured - the prediction made one period before (0 on the first call).\n"
       << " *\n";
  }
  os
     << " * Network: " << shapes << " (" << spec.params() << " parameters), "
     << (L > 1 ? std::string(nn::activation_name(spec.activation)) + " between layers" : "linear") << "\n"
     << " * Weights: " << (q8 ? "int8, one fp32 scale per output row: w = scale[row] * q, q in [-127, 127]"
                              : "fp32") << "\n"
     << " * Memory: no allocation, nothing global is written. RAM = the caller's " << n << "_state\n"
     << " *   (" << spec.signals.size() << " x " << spec.history << " floats of history and a flag"
     << (spec.pi.enabled ? "; the PI's integral, the last prediction and a flag" : "") << ") + step()'s stack\n"
     << " *   (two buffers of " << max_width(spec) << " floats).\n"
     << " * Checked against the C++ model (nn::Mlp" << (q8 ? " with these int8 weights dequantised" : "")
     << ") to " << tolerance << ".\n"
     << " * Builds with: cc -std=c99 -Wall -Werror -c " << n << ".c   (link with -lm)\n"
     << " */\n";
  os << "#include <math.h>\n\n";
  os << "#define " << N << "_SIGNALS " << spec.signals.size() << "\n"
     << "#define " << N << "_HISTORY " << spec.history << "\n"
     << "#define " << N << "_INPUTS " << spec.inputs() << "\n"
     << "#define " << N << "_MAXW " << max_width(spec) << "\n\n";
  os << "typedef struct {\n"
     << "    float hist[" << N << "_SIGNALS][" << N << "_HISTORY]; /* hist[s][k]: in[s] k periods ago */\n"
     << "    int started;                          /* 0 until the first step */\n";
  if (spec.pi.enabled)
    os << "    float integral;                       /* the PI's integral term */\n"
       << "    float predicted;                      /* the model's last prediction of y */\n"
       << "    int predicting;                       /* 0 until the first control period */\n";
  os << "} " << n << "_state;\n\n";
  os << "void " << n << "_init(" << n << "_state* s);\n"
     << "float " << n << "_step(" << n << "_state* s, const float* in);\n"
     << "unsigned long " << n << "_state_bytes(void);\n";
  if (spec.pi.enabled)
    os << "void " << n << "_control_init(" << n << "_state* s, float integral);\n"
       << "float " << n << "_control(" << n << "_state* s, float setpoint, float measured, float* residual);\n";
  os << "\n";

  // -- the features
  os << "static const unsigned char " << n << "_feat_signal[" << N << "_INPUTS] = {\n";
  write_array(os, spec.features.size(), 24, [&](size_t i) { return std::to_string(spec.features[i].signal); });
  os << "};\nstatic const unsigned short " << n << "_feat_lag[" << N << "_INPUTS] = {\n";
  write_array(os, spec.features.size(), 24, [&](size_t i) { return std::to_string(spec.features[i].lag); });
  os << "};\nstatic const float " << n << "_feat_mean[" << N << "_INPUTS] = {\n";
  write_array(os, spec.features.size(), 6, [&](size_t i) { return c_float(spec.features[i].mean); });
  os << "};\nstatic const float " << n << "_feat_std[" << N << "_INPUTS] = {\n";
  write_array(os, spec.features.size(), 6, [&](size_t i) { return c_float(spec.features[i].std); });
  os << "};\n\n";

  // -- the weights, layer by layer
  for (size_t l = 0; l < L; ++l) {
    const ExportLayer& E = spec.layers[l];
    const std::string p = n + "_l" + std::to_string(l + 1);
    os << "/* layer " << l + 1 << ": (" << E.out << ", " << E.in << ") */\n";
    if (q8) {
      const kernels::PackedWeights pw = kernels::pack_weights(E.weight.data(), E.out, E.in, kernels::WeightFormat::int8);
      const auto* q = reinterpret_cast<const int8_t*>(pw.data.data());
      os << "static const signed char " << p << "_q[" << E.out * E.in << "] = {\n";
      write_array(os, static_cast<size_t>(E.out) * static_cast<size_t>(E.in), 16, [&](size_t i) { return std::to_string(q[i]); });
      os << "};\nstatic const float " << p << "_scale[" << E.out << "] = {\n";
      write_array(os, static_cast<size_t>(E.out), 6, [&](size_t i) { return c_float(pw.scales[i]); });
    } else {
      os << "static const float " << p << "_w[" << E.out * E.in << "] = {\n";
      write_array(os, E.weight.size(), 6, [&](size_t i) { return c_float(E.weight[i]); });
    }
    os << "};\nstatic const float " << p << "_b[" << E.out << "] = {\n";
    write_array(os, E.bias.size(), 6, [&](size_t i) { return c_float(E.bias[i]); });
    os << "};\n\n";
  }

  // -- the layer loops
  if (q8) {
    os << "/* y (out) = scale * (q x) + b: the integer weights are widened one by one; one multiply\n"
          "   by the row's scale after the sum instead of one per weight. */\n"
       << "static void " << n << "_dense(float* y, const float* x, const signed char* q, const float* scale,\n"
       << "                        const float* b, int in, int out) {\n"
       << "    int o, i;\n"
       << "    for (o = 0; o < out; ++o) {\n"
       << "        const signed char* row = q + o * in;\n"
       << "        float acc = 0.0f;\n"
       << "        for (i = 0; i < in; ++i) acc += (float)row[i] * x[i];\n"
       << "        y[o] = scale[o] * acc + b[o];\n"
       << "    }\n"
       << "}\n\n";
  } else {
    os << "/* y (out) = W x + b, W (out, in) row-major */\n"
       << "static void " << n << "_dense(float* y, const float* x, const float* w, const float* b, int in, int out) {\n"
       << "    int o, i;\n"
       << "    for (o = 0; o < out; ++o) {\n"
       << "        const float* row = w + o * in;\n"
       << "        float acc = b[o];\n"
       << "        for (i = 0; i < in; ++i) acc += row[i] * x[i];\n"
       << "        y[o] = acc;\n"
       << "    }\n"
       << "}\n\n";
  }
  if (L > 1) {
    os << "static void " << n << "_act(float* v, int count) {\n    int i;\n    for (i = 0; i < count; ++i) ";
    switch (spec.activation) {
      case nn::Activation::ReLU: os << "v[i] = v[i] > 0.0f ? v[i] : 0.0f;\n"; break;
      case nn::Activation::Tanh: os << "v[i] = tanhf(v[i]);\n"; break;
      case nn::Activation::Sigmoid: os << "v[i] = 1.0f / (1.0f + expf(-v[i]));\n"; break;
    }
    os << "}\n\n";
  }

  // -- init and step
  os << "void " << n << "_init(" << n << "_state* s) {\n"
     << "    int i, k;\n"
     << "    for (i = 0; i < " << N << "_SIGNALS; ++i)\n"
     << "        for (k = 0; k < " << N << "_HISTORY; ++k) s->hist[i][k] = 0.0f;\n"
     << "    s->started = 0;\n"
     << "}\n\n";
  os << "unsigned long " << n << "_state_bytes(void) { return (unsigned long)sizeof(" << n << "_state); }\n\n";
  os << "float " << n << "_step(" << n << "_state* s, const float* in) {\n"
     << "    float a[" << N << "_MAXW], b[" << N << "_MAXW];\n"
     << "    int i, k;\n"
     << "    /* the history: shift by one period, the new sample at [0] (the first fills all of it) */\n"
     << "    for (i = 0; i < " << N << "_SIGNALS; ++i) {\n"
     << "        for (k = " << N << "_HISTORY - 1; k > 0; --k) s->hist[i][k] = s->started ? s->hist[i][k - 1] : in[i];\n"
     << "        s->hist[i][0] = in[i];\n"
     << "    }\n"
     << "    s->started = 1;\n"
     << "    for (i = 0; i < " << N << "_INPUTS; ++i)\n"
     << "        a[i] = (s->hist[" << n << "_feat_signal[i]][" << n << "_feat_lag[i]] - " << n << "_feat_mean[i]) / "
     << n << "_feat_std[i];\n";
  // ping-pong between a and b
  for (size_t l = 0; l < L; ++l) {
    const ExportLayer& E = spec.layers[l];
    const std::string p = n + "_l" + std::to_string(l + 1);
    const char* src = l % 2 == 0 ? "a" : "b";
    const char* dst = l % 2 == 0 ? "b" : "a";
    os << "    " << n << "_dense(" << dst << ", " << src << ", ";
    if (q8) os << p << "_q, " << p << "_scale, ";
    else os << p << "_w, ";
    os << p << "_b, " << E.in << ", " << E.out << ");\n";
    if (l + 1 < L) os << "    " << n << "_act(" << dst << ", " << E.out << ");\n";
  }
  const char* last = (L - 1) % 2 == 0 ? "b" : "a";
  os << "    return ";
  if (spec.out_base_signal >= 0) os << "s->hist[" << spec.out_base_signal << "][0] + ";
  os << c_float(spec.out_mean) << " + " << c_float(spec.out_std) << " * " << last << "[0];\n}\n";
  if (spec.pi.enabled) {
    const ExportPi& pi = spec.pi;
    os << "\nvoid " << n << "_control_init(" << n << "_state* s, float integral) {\n"
       << "    " << n << "_init(s);\n"
       << "    s->integral = integral;\n"
       << "    s->predicted = 0.0f;\n"
       << "    s->predicting = 0;\n"
       << "}\n\n"
       << "float " << n << "_control(" << n << "_state* s, float setpoint, float measured, float* residual) {\n"
       << "    const float kp = " << c_float(pi.kp) << ", ki = " << c_float(pi.ki) << ", dt = " << c_float(pi.dt) << ";\n"
       << "    const float u_min = " << c_float(pi.u_min) << ", u_max = " << c_float(pi.u_max) << ";\n"
       << "    const float e = setpoint - measured;\n"
       << "    const float integral_next = s->integral + ki * dt * e;\n"
       << "    const float u_raw = kp * e + integral_next;\n"
       << "    float u, in[2];\n"
       << "    /* anti-windup: while the output is past a limit and e pushes further, I stops growing */\n"
       << "    if (!((u_raw > u_max && e > 0.0f) || (u_raw < u_min && e < 0.0f))) s->integral = integral_next;\n"
       << "    u = kp * e + s->integral;\n"
       << "    u = u < u_min ? u_min : (u > u_max ? u_max : u);\n"
       << "    if (residual) *residual = s->predicting ? measured - s->predicted : 0.0f;\n"
       << "    in[" << pi.measured << "] = measured;\n"
       << "    in[" << pi.command << "] = u;\n"
       << "    s->predicted = " << n << "_step(s, in);\n"
       << "    s->predicting = 1;\n"
       << "    return u;\n"
       << "}\n";
  }
  return os.str();
}

std::string generate_c_driver(const ExportSpec& spec, const std::string& c_file) {
  spec.validate();
  const std::string n = spec.name, N = upper(spec.name);
  std::ostringstream os;
  os << "/* " << n << "_driver.c: generated by nnlab (lessons/13-control/export_c.cpp): runs " << c_file << ".\n"
     << " *   run             one line of " << spec.signals.size() << " inputs per period on stdin -> one output per line\n"
     << " *   bench REPEATS   the same inputs, every step timed (CLOCK_MONOTONIC; TSC on x86-64)\n"
     << " *   rt PERIOD_US    one step per period at absolute deadlines (clock_nanosleep TIMER_ABSTIME)\n"
     << " *   info            sizeof the state struct\n"
     << " * The driver allocates (the inputs, the timings); the model does not. */\n"
     << "#define _POSIX_C_SOURCE 200112L\n"
     << "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n"
     << "#include \"" << c_file << "\"\n\n";
  os << R"(static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static unsigned long long tsc(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return __builtin_ia32_rdtsc();
#else
    return 0ULL;
#endif
}

static int cmp_ll(const void* a, const void* b) {
    const long long x = *(const long long*)a, y = *(const long long*)b;
    return x < y ? -1 : x > y;
}

/* the q-quantile of v[0..n) (sorts v): the value at rank floor(q (n - 1)) */
static long long quantile(long long* v, long n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_ll);
    return v[(long)(q * (double)(n - 1))];
}

static float* read_inputs(long* count) {
    long cap = 1024, n = 0;
    float* v = (float*)malloc((size_t)cap * sizeof *v);
    float x;
    while (v != NULL && scanf("%f", &x) == 1) {
        if (n == cap) {
            float* grown;
            cap *= 2;
            grown = (float*)realloc(v, (size_t)cap * sizeof *v);
            if (grown == NULL) { free(v); return NULL; }
            v = grown;
        }
        v[n++] = x;
    }
)";
  os << "    *count = n / " << N << "_SIGNALS;\n"
     << "    return v;\n}\n\n";
  os << "int main(int argc, char** argv) {\n"
     << "    " << n << "_state state;\n"
     << "    const char* mode = argc > 1 ? argv[1] : \"run\";\n"
     << "    long steps = 0, t, r;\n"
     << "    float* in;\n"
     << "    if (strcmp(mode, \"info\") == 0) {\n"
     << "        printf(\"state_bytes %lu\\n\", (unsigned long)sizeof state);\n"
     << "        return 0;\n"
     << "    }\n"
     << "    in = read_inputs(&steps);\n"
     << "    if (in == NULL || steps < 1) { fprintf(stderr, \"no inputs on stdin\\n\"); return 2; }\n"
     << "    " << n << "_init(&state);\n"
     << "    if (strcmp(mode, \"run\") == 0) {\n"
     << "        for (t = 0; t < steps; ++t) printf(\"%.9g\\n\", (double)" << n << "_step(&state, in + t * " << N
     << "_SIGNALS));\n"
     << "    } else if (strcmp(mode, \"bench\") == 0) {\n"
     << "        const long repeats = argc > 2 ? atol(argv[2]) : 1;\n"
     << "        const long total = steps * (repeats > 0 ? repeats : 1);\n"
     << "        long long* ns = (long long*)malloc((size_t)total * sizeof *ns);\n"
     << "        long long* cyc = (long long*)malloc((size_t)total * sizeof *cyc);\n"
     << "        long long* over = (long long*)malloc(1000 * sizeof *over);\n"
     << "        volatile float sink = 0.0f;\n"
     << "        long long t0, batch_ns;\n"
     << "        long i = 0;\n"
     << "        if (ns == NULL || cyc == NULL || over == NULL) return 2;\n"
     << "        for (t = 0; t < 1000; ++t) { long long a = now_ns(); over[t] = now_ns() - a; }\n"
     << "        for (r = 0; r < (repeats > 0 ? repeats : 1); ++r) {\n"
     << "            " << n << "_init(&state);\n"
     << "            for (t = 0; t < steps; ++t, ++i) {\n"
     << "                const unsigned long long c0 = tsc();\n"
     << "                const long long a = now_ns();\n"
     << "                sink += " << n << "_step(&state, in + t * " << N << "_SIGNALS);\n"
     << "                ns[i] = now_ns() - a;\n"
     << "                cyc[i] = (long long)(tsc() - c0);\n"
     << "            }\n"
     << "        }\n"
     << "        /* the same steps again without per-step clocks: the mean cost with no timer in it */\n"
     << "        " << n << "_init(&state);\n"
     << "        t0 = now_ns();\n"
     << "        for (t = 0; t < steps; ++t) sink += " << n << "_step(&state, in + t * " << N << "_SIGNALS);\n"
     << "        batch_ns = now_ns() - t0;\n"
     << "        printf(\"steps %ld ns_median %lld ns_p99 %lld ns_max %lld tsc_median %lld tsc_p99 %lld tsc_max %lld \"\n"
     << "               \"timer_overhead_ns %lld batch_ns_per_step %.1f\\n\", total, quantile(ns, total, 0.5),\n"
     << "               quantile(ns, total, 0.99), quantile(ns, total, 1.0), quantile(cyc, total, 0.5),\n"
     << "               quantile(cyc, total, 0.99), quantile(cyc, total, 1.0), quantile(over, 1000, 0.5),\n"
     << "               (double)batch_ns / (double)steps);\n"
     << "        (void)sink;\n"
     << "    } else if (strcmp(mode, \"rt\") == 0) {\n"
     << "        const long period_us = argc > 2 ? atol(argv[2]) : 1000;\n"
     << "        long long* late = (long long*)malloc((size_t)steps * sizeof *late);\n"
     << "        long long step_max = 0, missed = 0, deadline;\n"
     << "        struct timespec ts;\n"
     << "        volatile float sink = 0.0f;\n"
     << "        if (late == NULL || period_us < 1) return 2;\n"
     << "        deadline = now_ns() + 1000LL * period_us;\n"
     << "        for (t = 0; t < steps; ++t) {\n"
     << "            long long woke, done;\n"
     << "            ts.tv_sec = (time_t)(deadline / 1000000000LL);\n"
     << "            ts.tv_nsec = (long)(deadline % 1000000000LL);\n"
     << "            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {}\n"
     << "            woke = now_ns();\n"
     << "            late[t] = woke - deadline;\n"
     << "            sink += " << n << "_step(&state, in + t * " << N << "_SIGNALS);\n"
     << "            done = now_ns();\n"
     << "            if (done - woke > step_max) step_max = done - woke;\n"
     << "            if (done > deadline + 1000LL * period_us) ++missed; /* the output came after the next tick */\n"
     << "            deadline += 1000LL * period_us; /* a fixed grid: lateness never shifts it */\n"
     << "        }\n"
     << "        printf(\"ticks %ld late_ns_median %lld late_ns_p99 %lld late_ns_max %lld step_ns_max %lld missed %lld\\n\",\n"
     << "               steps, quantile(late, steps, 0.5), quantile(late, steps, 0.99), quantile(late, steps, 1.0),\n"
     << "               step_max, missed);\n"
     << "        (void)sink;\n"
     << "    } else {\n"
     << "        fprintf(stderr, \"unknown mode %s (run, bench, rt, info)\\n\", mode);\n"
     << "        return 2;\n"
     << "    }\n"
     << "    free(in);\n"
     << "    return 0;\n"
     << "}\n";
  return os.str();
}

// ---- compiling and measuring ---------------------------------------------------------------
CommandResult run_command(const std::string& cmd, const std::string& stdin_file) {
  std::string full = "(" + cmd + ")";
  if (!stdin_file.empty()) full += " < '" + stdin_file + "'";
  full += " 2>&1";
  CommandResult r;
  FILE* p = popen(full.c_str(), "r");
  NN_CHECK(p != nullptr, "cannot run: " << cmd);
  std::array<char, 4096> buf{};
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), got);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string find_c_compiler() {
  if (const char* e = std::getenv("NNLAB_CC"); e != nullptr && *e != '\0') return e;
  const std::string configured = NNLAB_C_COMPILER;
  if (!configured.empty() && run_command("'" + configured + "' --version").status == 0) return configured;
  for (const char* c : {"cc", "gcc", "clang"}) {
    if (run_command(std::string("command -v ") + c).status == 0) return c;
  }
  return "";
}

void compile_c(const std::string& cc, const std::vector<std::string>& sources, const std::string& out,
               const std::string& extra) {
  std::string cmd = "'" + cc + "' -std=c99 -Wall -Wextra -Werror -pedantic -O2";
  for (const std::string& s : sources) cmd += " '" + s + "'";
  cmd += " -o '" + out + "' " + extra;  // after the sources: libraries (-lm) resolve what they use
  const CommandResult r = run_command(cmd);
  NN_CHECK(r.status == 0, "the C compiler refused the exported code:\n  " << cmd << "\n" << r.output);
}

CodeSize measure_code_size(const std::string& cc, const std::string& c_file_in, const std::string& dir_in,
                           const std::string& name) {
  CodeSize cs;
  // Absolute: the compiler runs in `dir` (where -fstack-usage writes), and a relative --out-dir
  // (out/lesson13, the default) would then point nowhere.
  const std::string c_file = std::filesystem::absolute(c_file_in).string();
  const std::string dir = std::filesystem::absolute(dir_in).string();
  const std::string obj = dir + "/" + name + ".o";
  // -fstack-usage writes <obj without .o>.su next to the object (gcc; clang 16+)
  const CommandResult r = run_command("cd '" + dir + "' && '" + cc +
                                      "' -std=c99 -Wall -Wextra -Werror -pedantic -O2 -fstack-usage -c '" + c_file +
                                      "' -o '" + obj + "'");
  NN_CHECK(r.status == 0, "compiling " << c_file << " for its size failed:\n" << r.output);
  // `size -A`: one line per section, "name size addr"
  const CommandResult sz = run_command("size -A '" + obj + "'");
  NN_CHECK(sz.status == 0, "size -A " << obj << " failed (binutils' size is needed):\n" << sz.output);
  std::istringstream in(sz.output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string sec;
    int64_t bytes = 0;
    if (!(ls >> sec >> bytes)) continue;
    if (sec.rfind(".text", 0) == 0) cs.text += bytes;
    else if (sec.rfind(".rodata", 0) == 0) cs.rodata += bytes;
    else if (sec.rfind(".data", 0) == 0) cs.data += bytes;
    else if (sec.rfind(".bss", 0) == 0) cs.bss += bytes;
  }
  cs.stack_bytes = -1;
  std::ifstream su(dir + "/" + name + ".su");
  while (su && std::getline(su, line)) {
    // "file.c:LINE:COL:name_step\tBYTES\tstatic"
    const std::string fn = name + "_step";
    const size_t at = line.find(":" + fn + "\t");
    if (at == std::string::npos) continue;
    std::istringstream ls(line.substr(at + fn.size() + 2));
    ls >> cs.stack_bytes >> cs.stack_note;
  }
  return cs;
}

// ---- the whole check ------------------------------------------------------------------------
std::string export_tolerance_text() {
  std::ostringstream os;
  os << "|y_c - y_cpp| <= " << kExportAtol << " + " << kExportRtol << " |y_cpp| at every step";
  return os.str();
}

BuiltExport build_export(const ExportSpec& spec, kernels::WeightFormat format, const std::string& dir,
                         const std::string& cc) {
  NN_CHECK(!cc.empty(), "export: no C compiler found (set NNLAB_CC, or install cc / gcc / clang)");
  BuiltExport b;
  b.c_file = dir + "/" + spec.name + ".c";
  b.driver_c = dir + "/" + spec.name + "_driver.c";
  b.driver_exe = dir + "/" + spec.name + "_driver";
  {
    std::ofstream f(b.c_file);
    f << generate_c(spec, format, export_tolerance_text());
    NN_CHECK(f.good(), "cannot write " << b.c_file);
  }
  {
    std::ofstream f(b.driver_c);
    f << generate_c_driver(spec, spec.name + ".c");
    NN_CHECK(f.good(), "cannot write " << b.driver_c);
  }
  compile_c(cc, {b.driver_c}, b.driver_exe, "-lm");
  return b;
}

void write_inputs(const std::string& file, const std::vector<float>& inputs, int signals) {
  std::ofstream f(file);
  NN_CHECK(f.good(), "cannot write " << file);
  char buf[32];
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(inputs[i]));  // reads back to the same float
    f << buf << ((i + 1) % static_cast<size_t>(signals) == 0 ? '\n' : ' ');
  }
  NN_CHECK(f.good(), "writing " << file << " failed");
}

Agreement compare_with_cpp(const ExportSpec& spec, kernels::WeightFormat format, const std::vector<float>& inputs,
                           const std::string& driver_exe, const std::string& dir) {
  const int S = static_cast<int>(spec.signals.size());
  const std::string in_file = dir + "/" + spec.name + "_inputs.txt";
  write_inputs(in_file, inputs, S);
  const CommandResult r = run_command("'" + driver_exe + "' run", in_file);
  NN_CHECK(r.status == 0, "the exported C program failed (status " << r.status << "):\n" << r.output);
  Agreement a;
  a.steps = static_cast<int64_t>(inputs.size() / static_cast<size_t>(S));
  std::istringstream out(r.output);
  float v = 0.0f;
  while (out >> v) a.c_out.push_back(v);
  NN_CHECK(static_cast<int64_t>(a.c_out.size()) == a.steps,
           "the exported C program printed " << a.c_out.size() << " outputs for " << a.steps << " steps");
  SpecRunner ref(spec, format);
  for (int64_t t = 0; t < a.steps; ++t) {
    const float y = ref.step(inputs.data() + t * S);
    a.ref_out.push_back(y);
    const double c = a.c_out[static_cast<size_t>(t)];
    const double err = std::fabs(c - y);
    const double rel = err / std::max(std::fabs(static_cast<double>(y)), 1e-30);
    a.max_abs = std::max(a.max_abs, err);
    a.max_rel = std::max(a.max_rel, rel);
    if (!(err <= kExportAtol + kExportRtol * std::fabs(static_cast<double>(y)))) {  // NaN fails
      if (a.first_bad < 0) a.first_bad = t;
      ++a.bad;
    }
  }
  return a;
}

// ---- the C file inside this process ---------------------------------------------------------
LoadedExport::LoadedExport(const std::string& cc, const ExportSpec& spec, const std::string& c_file,
                           const std::string& dir) {
  const std::string so = dir + "/lib" + spec.name + ".so";
  compile_c(cc, {c_file}, so, "-shared -fPIC -lm");
  handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  NN_CHECK(handle_ != nullptr, "cannot load " << so << ": " << dlerror());
  // POSIX: a function pointer from dlsym's void* (the one cast C++ leaves to the platform)
  init_ = reinterpret_cast<void (*)(void*)>(dlsym(handle_, (spec.name + "_init").c_str()));
  step_ = reinterpret_cast<float (*)(void*, const float*)>(dlsym(handle_, (spec.name + "_step").c_str()));
  auto bytes = reinterpret_cast<unsigned long (*)()>(dlsym(handle_, (spec.name + "_state_bytes").c_str()));
  NN_CHECK(init_ != nullptr && step_ != nullptr && bytes != nullptr,
           so << " lacks " << spec.name << "_init, _step or _state_bytes");
  if (spec.pi.enabled) {
    control_init_ = reinterpret_cast<void (*)(void*, float)>(dlsym(handle_, (spec.name + "_control_init").c_str()));
    control_ = reinterpret_cast<float (*)(void*, float, float, float*)>(dlsym(handle_, (spec.name + "_control").c_str()));
    NN_CHECK(control_init_ != nullptr && control_ != nullptr, so << " lacks " << spec.name << "_control_init or _control");
  }
  state_.assign((bytes() + sizeof(double) - 1) / sizeof(double), 0.0);
  init();
}

LoadedExport::~LoadedExport() {
  if (handle_ != nullptr) dlclose(handle_);
}

void LoadedExport::init() { init_(state_.data()); }

float LoadedExport::step(const float* in) { return step_(state_.data(), in); }

void LoadedExport::control_init(float integral) {
  NN_CHECK(control_init_ != nullptr, "this exported file has no controller (its spec carries no PI)");
  control_init_(state_.data(), integral);
}

float LoadedExport::control(float setpoint, float y, float* residual) {
  NN_CHECK(control_ != nullptr, "this exported file has no controller (its spec carries no PI)");
  return control_(state_.data(), setpoint, y, residual);
}

// ---- the stand-in NARX network -------------------------------------------------------------
namespace {

void mean_std(const std::vector<float>& v, size_t from, size_t to, float& mean, float& stdev) {
  double s = 0.0, s2 = 0.0;
  for (size_t i = from; i < to; ++i) s += v[i];
  const double m = s / static_cast<double>(to - from);
  for (size_t i = from; i < to; ++i) s2 += (v[i] - m) * (v[i] - m);
  mean = static_cast<float>(m);
  stdev = static_cast<float>(std::sqrt(s2 / static_cast<double>(to - from)));
  if (!(stdev > 0.0f)) stdev = 1.0f;
}

}  // namespace

ExportSpec train_narx(const lessons::Series& train, const NarxConfig& cfg, uint64_t seed) {
  NN_CHECK(cfg.na >= 1 && cfg.nb >= 1, "narx: na and nb must be >= 1");
  const std::vector<float> level = train.channel("level"), pump = train.channel("pump");
  const int H = std::max(cfg.na, cfg.nb);
  NN_CHECK(train.steps > H + 2 * cfg.batch, "narx: " << train.steps << " steps are too few for a history of " << H);
  ExportSpec spec;
  spec.name = "tank_narx";
  spec.description = "NARX one-step predictor of the tank's level (lesson 13): level(t+1) from the last " +
                     std::to_string(cfg.na) + " levels and " + std::to_string(cfg.nb) + " pump commands.";
  spec.signals = {"level y(t), m (measured)", "pump u(t) in [0, 1] (the command just sent)"};
  spec.output = "the predicted level y(t+1), m";
  spec.history = H;
  spec.out_base_signal = 0;
  float lm = 0, ls = 1, pm = 0, ps = 1;
  mean_std(level, 0, level.size(), lm, ls);
  mean_std(pump, 0, pump.size(), pm, ps);
  for (int k = 0; k < cfg.na; ++k) spec.features.push_back({0, k, lm, ls});
  for (int k = 0; k < cfg.nb; ++k) spec.features.push_back({1, k, pm, ps});
  // targets: the change of the level, normalised
  const size_t first = static_cast<size_t>(H - 1), last = static_cast<size_t>(train.steps - 1);  // t in [first, last)
  const size_t n = last - first;
  std::vector<float> dy(n);
  for (size_t i = 0; i < n; ++i) dy[i] = level[first + i + 1] - level[first + i];
  float dm = 0, ds = 1;
  mean_std(dy, 0, n, dm, ds);
  spec.out_mean = dm;
  spec.out_std = ds;
  const int F = spec.inputs();
  std::vector<float> X(n * static_cast<size_t>(F)), Y(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t t = first + i;
    for (int f = 0; f < F; ++f) {
      const ExportFeature& e = spec.features[static_cast<size_t>(f)];
      const float v = e.signal == 0 ? level[t - static_cast<size_t>(e.lag)] : pump[t - static_cast<size_t>(e.lag)];
      X[i * static_cast<size_t>(F) + static_cast<size_t>(f)] = (v - e.mean) / e.std;
    }
    Y[i] = (dy[i] - dm) / ds;
  }
  nn::MlpConfig mc;
  mc.sizes = {F};
  for (int h : cfg.hidden) mc.sizes.push_back(h);
  mc.sizes.push_back(1);
  mc.activation = nn::Activation::Tanh;
  nn::Rng rng(seed);
  nn::Mlp mlp(mc, rng);
  nn::AdamConfig ac;
  ac.lr = cfg.lr;
  nn::Adam opt(mlp.params(), ac);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  const int B = cfg.batch;
  std::vector<float> xb(static_cast<size_t>(B) * static_cast<size_t>(F)), dz(static_cast<size_t>(B));
  for (int ep = 0; ep < cfg.epochs; ++ep) {
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(static_cast<uint32_t>(i + 1))]);
    for (size_t b0 = 0; b0 + static_cast<size_t>(B) <= n; b0 += static_cast<size_t>(B)) {
      for (int b = 0; b < B; ++b) {
        const size_t row = order[b0 + static_cast<size_t>(b)];
        std::copy_n(X.data() + row * static_cast<size_t>(F), F, xb.data() + static_cast<size_t>(b) * static_cast<size_t>(F));
      }
      const float* z = mlp.forward(xb.data(), B);
      // MSE: d/dz mean (z - y)^2 = 2 (z - y) / B
      for (int b = 0; b < B; ++b) dz[static_cast<size_t>(b)] = 2.0f * (z[b] - Y[order[b0 + static_cast<size_t>(b)]]) / static_cast<float>(B);
      opt.zero_grad();
      mlp.backward(dz.data(), B);
      opt.step();
    }
  }
  set_network(spec, mlp);
  return spec;
}

std::vector<float> one_step_predictions(const ExportSpec& spec, kernels::WeightFormat format, const lessons::Series& s) {
  const std::vector<float> level = s.channel("level"), pump = s.channel("pump");
  NN_CHECK(spec.signals.size() == 2, "one_step_predictions: the spec must read {level, pump}");
  SpecRunner run(spec, format);
  std::vector<float> pred(static_cast<size_t>(s.steps));
  for (int t = 0; t < s.steps; ++t) {
    const float in[2] = {level[static_cast<size_t>(t)], pump[static_cast<size_t>(t)]};
    pred[static_cast<size_t>(t)] = run.step(in);
  }
  return pred;
}

}  // namespace lesson13
