// Lesson 13: a network in the control loop. See lessons/13-control/README.md. The plant is the
// tank of lessons 05-06 (lessons/common/plant.h). Its parts:
//
//   soft-sensor  estimate a variable the plant does not measure (or a failed transmitter) from
//                the signals it does: a network against a linear estimator (soft_sensor_part.h)
//   mpc          the learned plant model as the predictor of a model-predictive controller,
//                against the tuned PI on the same scenarios (mpc_part.h)
//   faults       a stuck and a drifting level transmitter, detected from the model's prediction
//                residuals with a threshold chosen on fault-free data (faults_part.h)
//   export       a trained network as an allocation-free C99 file, checked against the C++
//                model, its size, RAM and cycles per step measured (export_part.h)
//   all          every part, in that order
//
// --json PATH writes what the parts measured as one JSON object (schema "nnlab-lesson13/1"):
//   {"schema", "machine": {...}, "quick", "parts": {"<part>": {...}, ...}}; each part's
//   fields are listed in its header.
// --quick makes every part small (seconds: the ctest smoke run); NNLAB_QUICK=1 too.
#pragma once

#include <CLI/CLI.hpp>

#include "lessons/common/parts.h"

#include <cstdint>
#include <string>

#include "lessons/13-control/export_part.h"
#include "lessons/13-control/faults_part.h"
#include "lessons/13-control/mpc_part.h"
#include "lessons/13-control/soft_sensor_part.h"

namespace lesson13 {

struct Options {
  std::string part = "all";  // soft-sensor | mpc | faults | export | all
  bool quick = false;        // --quick, or NNLAB_QUICK=1: small sizes everywhere
  int threads = 0;           // OpenMP threads (0: the default)
  std::string json;          // write every part's numbers here (one JSON object); empty: none
  std::string out_dir = "out/lesson13";  // trained models, logs, exported C files
  uint64_t seed = 13;        // plant runs, weights and noise of the parts
  SoftSensorOptions soft_sensor;  // part soft-sensor (soft_sensor_part.h)
  MpcOptions mpc;                 // part mpc (mpc_part.h)
  FaultsOptions faults;           // part faults (faults_part.h)
  ExportOptions export_;          // part export (export_part.h)
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_soft_sensor_part(const Options& opts);  // soft_sensor_part.cpp
int run_mpc_part(const Options& opts);          // mpc_part.cpp
int run_faults_part(const Options& opts);       // faults_part.cpp
int run_export_part(const Options& opts);       // export_part.cpp

// ---- shared by the parts (control_lesson.cpp) ----------------------------------------------
using lessons::record_part;
// A JSON number (null when not finite), as the records write them.
std::string jnum(double v);

}  // namespace lesson13
