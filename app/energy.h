// app/energy.h: `nnlab energy`, what this machine's energy counters read (kernels/energy.h):
// every counter probed, with what it reads or why it cannot; --run "<command>" measures the
// joules of a child command; --roofline prints the estimated energy roofline of the weight
// formats (fp32 ... ternary, 2:4), labelled as an estimate.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace app {

struct EnergyOptions {
  std::string run;             // a shell command to measure; empty: probe only
  double sample_seconds = 1.0; // with no --run: read the counters over this long (idle power)
  bool roofline = false;       // print the energy roofline (an estimate)
  double params = 124e6;       // the decoder's weights for --roofline (GPT-2 small)
  std::string json;            // write the probe (and the --run measurement) here
};

void add_energy_options(CLI::App& app, EnergyOptions& opts);
int run_energy(const EnergyOptions& opts);

}  // namespace app
