// app/energy.cpp: `nnlab energy`. Probes every energy counter kernels/energy.h knows (RAPL
// through powercap and through perf, NVML), prints what each reads or why it cannot, then
// either reads them over --seconds (what the machine draws at rest, other processes included)
// or over a child command (--run "<command>", run by /bin/sh -c): its joules, seconds and
// watts per counter. Nothing readable: it says so, and never prints a joule it did not read.
// --roofline adds the energy roofline, an estimate from a cited model, labelled as one.
#include "app/energy.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <thread>

#include "kernels/energy.h"
#include "kernels/harness.h"
#include "nn/cli_checks.h"

namespace app {

namespace e = kernels::energy;

void add_energy_options(CLI::App& app, EnergyOptions& opts) {
  app.add_option("--run", opts.run, "A shell command to measure: its joules, seconds and watts per counter");
  app.add_option("--seconds", opts.sample_seconds, "Without --run: read the counters over this long")
      ->check(nn::FiniteRange(1e-3, 3600.0))
      ->capture_default_str();
  app.add_flag("--roofline", opts.roofline,
               "Print the energy roofline of fp32, bf16, int8, int4, ternary and 2:4 weights (an estimate)");
  app.add_option("--params", opts.params, "Weights of the decoder in the roofline")
      ->check(nn::FiniteRange(1.0, 1e15))
      ->capture_default_str();
  app.add_option("--json", opts.json, "Write the probe and the measurement as JSON to this file");
}

namespace {

// Runs `command` under /bin/sh -c; its exit status (128 + signal when killed).
int run_child(const std::string& command) {
  std::cout.flush();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void print_measurement(const e::Measurement& m) {
  if (!m.readable) {
    std::cout << "energy: not readable here (" << m.reason << ")\n";
    return;
  }
  std::cout << std::setprecision(4) << "energy (measured): " << m.joules << " J over " << m.seconds << " s = "
            << m.watts() << " W (CPU packages + GPUs; idle power and other processes included)\n";
  for (const e::CounterJoules& p : m.parts) {
    std::cout << "  " << std::left << std::setw(32) << p.name << std::right << std::setw(12) << p.joules << " J"
              << (p.in_total ? "" : "   (inside or around a package: not added)") << "\n";
  }
}

}  // namespace

int run_energy(const EnergyOptions& opts) {
  e::Meter& meter = e::system_meter();
  std::cout << "Energy counters on this machine:\n";
  for (const e::Counter& c : meter.counters()) {
    std::cout << "  " << std::left << std::setw(9) << c.source << std::setw(26) << c.name << std::right;
    if (c.readable) {
      std::cout << "readable  " << c.path << (c.in_total ? "" : "  (not added to the total)") << "\n";
    } else {
      std::cout << "not readable: " << c.reason << "\n";
    }
  }
  e::Measurement m;
  int rc = 0;
  if (!opts.run.empty()) {
    std::cout << "\nrunning: " << opts.run << "\n";
    meter.start();
    rc = run_child(opts.run);
    m = meter.stop();
    std::cout << "\nexit status " << rc << ", " << std::setprecision(4) << m.seconds << " s\n";
    print_measurement(m);
  } else if (meter.readable()) {
    std::cout << "\nreading them for " << opts.sample_seconds << " s (this process sleeps)\n";
    meter.start();
    std::this_thread::sleep_for(std::chrono::duration<double>(opts.sample_seconds));
    m = meter.stop();
    print_measurement(m);
  } else {
    m.reason = meter.reason();
    std::cout << "\n";
    print_measurement(m);
    std::cout << "Without a counter, lesson 15 estimates from a model, and labels it so: nnlab energy --roofline\n";
  }
  if (opts.roofline) {
    std::cout << "\n";
    e::write_roofline(std::cout, opts.params, e::energy_roofline(opts.params));
  }
  if (!opts.json.empty()) {
    std::ofstream f(opts.json);
    if (!f) throw std::runtime_error("cannot write " + opts.json);
    f << "{\"schema\": \"nnlab-energy/1\", \"machine\": {"
      << kernels::harness::json_fields(kernels::harness::machine_info()) << "}, \"command\": "
      << kernels::harness::json_string(opts.run) << ", \"exit_status\": " << rc << ", \"energy\": " << e::json(m)
      << "}\n";
    std::cout << "wrote " << opts.json << "\n";
  }
  return rc;
}

}  // namespace app
