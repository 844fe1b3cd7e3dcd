// Lesson 13: a trained network as ONE self-contained, allocation-free C99 source file, the way
// a controller vendor's toolchain would take it (a PLC's C block, a microcontroller's firmware).
//
// What is exported is described once, by an ExportSpec: the network (an nn::Mlp's layers), how
// its input vector is built from the signals the controller samples every period (a window of
// past values of each signal, each normalised), and how its output becomes an engineering value
// (scaled, and optionally added to the newest value of a signal: a model that predicts the
// CHANGE of the level). Three things are generated from that one description and nothing else:
//
//   generate_c(spec, format)      the C file: weights as `const` arrays (fp32, or int8 with one
//                                 fp32 scale per output row, lesson 10's format of
//                                 kernels/weight_format.h), a state struct holding the input
//                                 history (fixed size, the caller owns it), and
//                                   void  <name>_init(<name>_state* s);
//                                   float <name>_step(<name>_state* s, const float in[N]);
//                                   unsigned long <name>_state_bytes(void);  (for hosts that
//                                   load the compiled block and allocate its state)
//                                 and, when the spec carries a PI (ExportPi below), the controller:
//                                   void  <name>_control_init(<name>_state* s, float integral);
//                                   float <name>_control(<name>_state* s, float setpoint,
//                                                        float measured, float* residual);
//                                 No malloc, no globals written, no recursion: the RAM is the
//                                 state struct plus step()'s stack frame (two layer buffers).
//   generate_c_driver(spec)       a small C program that #includes the C file and runs it on
//                                 inputs from stdin ("run"), times it ("bench"), or runs it at a
//                                 fixed sample period with absolute deadlines ("rt").
//   SpecRunner(spec, format)      the same computation in C++ through nn::Mlp::forward: the
//                                 reference the C file is checked against. For int8 its weights
//                                 are the dequantised int8 weights (kernels::unpack_weights), so
//                                 the check measures the C code, not the quantisation; the
//                                 quantisation's own cost is int8 against fp32, reported apart.
//
// The history: hist[s][0] is the newest sample of signal s, hist[s][k] the one k periods before.
// step() first shifts every signal's history by one and stores `in`, then computes. Before
// `history` samples have arrived the missing past is the FIRST sample repeated (the plant is
// assumed to have been at rest there), in C and in C++ alike.
//
//   feature i  x_i = (hist[signal_i][lag_i] - mean_i) / std_i
//   network    h = act(W1 x + b1), ..., z = W_L h + b_L      (z has one value)
//   output     y = out_mean + out_std * z, or hist[out_base_signal][0] + out_mean + out_std * z when
//              out_base_signal >= 0 (a model of the change; summed left to right, as PlantModel does)
//
// Compiling: find_c_compiler() is $NNLAB_CC, else the C compiler CMake found (NNLAB_C_COMPILER,
// a compile definition), else cc / gcc / clang on PATH. compile_c() runs it with
// -std=c99 -Wall -Wextra -Werror -pedantic and returns its output on failure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/weight_format.h"
#include "lessons/13-control/plant_model.h"
#include "lessons/common/plant.h"
#include "nn/layers.h"

namespace lesson13 {

// ---- what is exported --------------------------------------------------------------------
struct ExportFeature {
  int signal = 0;        // index into ExportSpec::signals
  int lag = 0;           // 0 = the newest sample
  float mean = 0.0f;     // x = (value - mean) / std
  float std = 1.0f;
};

struct ExportLayer {
  int in = 0, out = 0;
  std::vector<float> weight;  // (out, in), row-major, as nn::Linear
  std::vector<float> bias;    // (out)
};

// The controller the C file can carry beside the model: lessons::PiController's law (the PI of
// lessons 05-06, with its anti-windup and clamp) in fp32, a PLC's REAL. With it the file is the
// whole controller of one loop: every period <name>_control(&s, setpoint, y, &residual) computes
// the command u from the setpoint and the measurement y, then runs the model on
// in[measured] = y, in[command] = u (its prediction of the next y: the loop's soft sensor and
// fault monitor) and returns u; `residual` is y minus the prediction made one period before
// (0 on the first period; the pointer may be NULL).
struct ExportPi {
  bool enabled = false;
  int measured = 0, command = 1;  // which of the spec's signals y and u are (it must have exactly these two)
  float kp = 0.0f, ki = 0.0f, dt = 1.0f, u_min = 0.0f, u_max = 1.0f;
};

struct ExportSpec {
  std::string name = "nnlab_model";   // C identifier prefix: [a-z_][a-z0-9_]*
  std::string description;            // one line for the file's header comment
  std::vector<std::string> signals;   // what step() is given each period, in this order
  std::string output;                 // what step() returns (e.g. "level(t+1), m")
  int history = 1;                    // samples kept per signal (max lag + 1)
  std::vector<ExportFeature> features;
  nn::Activation activation = nn::Activation::Tanh;  // between layers, not after the last
  std::vector<ExportLayer> layers;
  float out_mean = 0.0f, out_std = 1.0f;
  int out_base_signal = -1;
  ExportPi pi;                        // optional: the loop's PI in the same file

  int inputs() const { return static_cast<int>(features.size()); }
  int64_t params() const;
  // nn::Error naming what is inconsistent (a lag past history, layer sizes that do not chain,
  // a name that is not a C identifier, a weight that is not finite, more than one output).
  void validate() const;
};

// The layers of `mlp` copied into `spec.layers`, its activation into `spec.activation`.
void set_network(ExportSpec& spec, nn::Mlp& mlp);
// The lesson's plant model (plant_model.h) as a spec: signals {level, pump}, its feature
// layout (na levels, nb pump commands, newest first) and normalisation, its change output.
ExportSpec spec_from_plant_model(const PlantModel& m, const std::string& name = "tank_model");

// ---- the C++ reference --------------------------------------------------------------------
// Runs the spec exactly as the C file does (same history rule), through an nn::Mlp whose
// weights are the spec's (fp32) or the dequantised int8 ones (format int8).
class SpecRunner {
 public:
  SpecRunner(const ExportSpec& spec, kernels::WeightFormat format);
  void reset();
  // in: spec.signals.size() values; returns the output.
  float step(const float* in);
  const std::vector<float>& features() const { return x_; }  // of the last step

 private:
  ExportSpec spec_;
  nn::Mlp mlp_;
  std::vector<float> hist_;  // (signals, history)
  std::vector<float> x_;
  bool started_ = false;
};

// The spec's weights as the int8 C file stores them, back in fp32 (w = scale[r] * q).
ExportSpec dequantized_int8(const ExportSpec& spec);

// ---- the generated C -----------------------------------------------------------------------
// `tolerance` is written into the header comment (what the test checks it to).
std::string generate_c(const ExportSpec& spec, kernels::WeightFormat format, const std::string& tolerance);
// The driver: `prog run` reads lines of spec.signals.size() numbers from stdin and prints one
// output per line (%.9g); `prog bench REPEATS` reads the inputs the same way, then steps through
// them REPEATS times timing every step (clock_gettime CLOCK_MONOTONIC, and the TSC on x86-64)
// and prints "steps N ns_median X ns_p99 X ns_max X tsc_median X tsc_max X"; `prog rt PERIOD_US`
// runs one step per period at absolute deadlines (clock_nanosleep TIMER_ABSTIME) and prints
// "ticks N late_ns_median X late_ns_p99 X late_ns_max X step_ns_max X missed X". It includes
// the C file by the name `c_file` (same folder).
std::string generate_c_driver(const ExportSpec& spec, const std::string& c_file);

// ---- compiling and measuring ---------------------------------------------------------------
std::string find_c_compiler();  // "" when none is found
struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};
// Runs `cmd` through /bin/sh, stdin from `stdin_file` when not empty.
CommandResult run_command(const std::string& cmd, const std::string& stdin_file = "");
// cc -std=c99 -Wall -Wextra -Werror -pedantic -O2 sources -o out `extra` (libraries: -lm); nn::Error with the
// compiler's output when it fails.
void compile_c(const std::string& cc, const std::vector<std::string>& sources, const std::string& out,
               const std::string& extra = "");

// Sizes of the C file's object (compiled alone with -O2 -c) and its stack.
struct CodeSize {
  int64_t text = 0, rodata = 0, data = 0, bss = 0;  // bytes, from the ELF section headers
  int64_t state_bytes = 0;  // sizeof the state struct (the C compiler's, printed by a probe)
  int64_t stack_bytes = 0;  // step()'s frame from -fstack-usage (gcc, clang); -1 unknown
  std::string stack_note;   // "static" / "dynamic" / "bounded" as the compiler says
};
CodeSize measure_code_size(const std::string& cc, const std::string& c_file, const std::string& dir,
                           const std::string& name);

// ---- the whole check: generate, compile, run, compare -----------------------------------------
// The tolerance the exported C is held to, against the C++ model with the same weights:
//   |y_c - y_cpp| <= kExportAtol + kExportRtol * |y_cpp|     (fp32 arithmetic in both; only the
//   order of the sums and libm's tanhf against std::tanh differ)
// Tighter than "1e-5 relative" on purpose: the output is a level near 0.5 m (fp32 spacing 6e-8)
// of which the network contributes only the change, out_std * z with out_std ~ 1e-3 m; 1e-5
// relative of the level would let the network's part be 0.5% wrong unseen. 2e-6 of the level is
// ~16 fp32 steps, ~1e-3 of the network's contribution. Measured: max 1.2e-7 relative (gcc 12, x86-64).
inline constexpr double kExportAtol = 1e-7;
inline constexpr double kExportRtol = 2e-6;
std::string export_tolerance_text();  // the line above, for the file's header comment
// The exported PI's command against lessons::PiController's (double) fed the same measurements:
// |u_c - u_cpp| <= kControlAtol at every period, in units of the pump command (range [0, 1]).
// The C law runs in fp32; its integral sums one rounding (~3e-8 of a command near 0.5) per period
// and nothing pulls it back to the double one, so the gap grows like a random walk: ~2e-6 after
// 5000 periods, far under a 16-bit actuator's resolution (1.5e-5). A wrong gain, sign or
// anti-windup rule is off by 1e-3 or more within a few periods.
inline constexpr double kControlAtol = 1e-5;

struct BuiltExport {
  std::string c_file, driver_c, driver_exe;  // <dir>/<name>.c, <dir>/<name>_driver.c, the program
};
// Writes the C file and its driver into `dir` and compiles the driver (nn::Error with the
// compiler's output when it refuses).
BuiltExport build_export(const ExportSpec& spec, kernels::WeightFormat format, const std::string& dir,
                         const std::string& cc);
// inputs (steps, signals) row-major as text, one period per line.
void write_inputs(const std::string& file, const std::vector<float>& inputs, int signals);

struct Agreement {
  int64_t steps = 0, bad = 0, first_bad = -1;  // bad: steps outside the tolerance
  double max_abs = 0.0, max_rel = 0.0;
  std::vector<float> c_out, ref_out;
};
// Runs the compiled driver on `inputs` (steps, signals) and the SpecRunner on the same, and
// compares every step with the tolerance above.
Agreement compare_with_cpp(const ExportSpec& spec, kernels::WeightFormat format, const std::vector<float>& inputs,
                           const std::string& driver_exe, const std::string& dir);

// ---- the C file inside this process -------------------------------------------------------------
// The C file compiled as a shared object (cc ... -shared -fPIC) and loaded with dlopen: what a
// host program (a soft-PLC runtime, a test bench) does with a vendor's compiled block. The
// state is a buffer of <name>_state_bytes() bytes that this object owns.
class LoadedExport {
 public:
  LoadedExport(const std::string& cc, const ExportSpec& spec, const std::string& c_file, const std::string& dir);
  ~LoadedExport();
  LoadedExport(const LoadedExport&) = delete;
  LoadedExport& operator=(const LoadedExport&) = delete;
  void init();                 // <name>_init
  float step(const float* in); // <name>_step
  // <name>_control_init and <name>_control: the spec's PI (nn::Error when the file has none).
  void control_init(float integral);
  float control(float setpoint, float measured, float* residual);
  size_t state_bytes() const { return state_.size() * sizeof(double); }

 private:
  void* handle_ = nullptr;
  void (*init_)(void*) = nullptr;
  float (*step_)(void*, const float*) = nullptr;
  void (*control_init_)(void*, float) = nullptr;
  float (*control_)(void*, float, float, float*) = nullptr;
  std::vector<double> state_;  // double: aligned for the struct's floats and int
};

// ---- a small NARX network, built straight into a spec ------------------------------------------
// The parts export the lesson's PlantModel (spec_from_plant_model); this is the same kind of
// model trained without it, small and fast: what the tests export and roll out.
// level(t+1) from the last na levels and nb pump commands (nb > dead time), trained as a change
// of the level, normalised; tanh MLP. Returns its spec (signals {"level", "pump"}).
struct NarxConfig {
  int na = 4, nb = 24;
  std::vector<int> hidden = {16, 16};
  int epochs = 8, batch = 64;
  float lr = 3e-3f;
};
ExportSpec train_narx(const lessons::Series& train, const NarxConfig& cfg, uint64_t seed);
// One-step predictions of a spec over a recorded series: pred[t] is the model's level(t+1)
// from the signals up to t (the spec's signals are read from the series by name).
std::vector<float> one_step_predictions(const ExportSpec& spec, kernels::WeightFormat format,
                                        const lessons::Series& s);

}  // namespace lesson13
