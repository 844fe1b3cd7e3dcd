// app/nnlab.cpp: the course's front door, `nnlab <command> [flags]`.
//
// The commands are one table, kCommands below: a row per command with its name, the line
// `nnlab --help` shows for it, and how it mounts its flags and runs. The help text, the
// message for an unknown command and the dispatch are all read from that table, so a new
// lesson is one row. `nnlab <command> --help` lists a command's own flags.
//
// Each lesson's command is the same code as the lesson's stand-alone program
// (lessons/NN-*/main.cpp, lessons/common/cli.h): add_options fills its Options, run runs it.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "app/bench.h"
#include "app/check.h"
#include "app/cuda.h"
#include "app/energy.h"
#include "app/info.h"
#include "gpt/backend_cuda.h"
#include "gpt/cli.h"
#include "gpt/hf_cli.h"
#include "gpt/plan_cli.h"
#include "gpt/train.h"
#include "kernels/comm.h"
#ifdef NNLAB_HAVE_MPI
#include "kernels/comm_mpi.h"
#endif
#ifdef NNLAB_HAVE_NCCL
#include "kernels/comm_nccl.h"
#endif
#include "lessons/01-neuron/neuron.h"
#include "lessons/02-backprop/backprop.h"
#include "lessons/03-matmul/matmul_lesson.h"
#include "lessons/04-cnn/cnn.h"
#include "lessons/05-rnn/rnn_lesson.h"
#include "lessons/06-lstm/lstm_lesson.h"
#include "lessons/07-attention/attention_lesson.h"
#include "lessons/08-gpt/gpt_lesson.h"
#include "lessons/09-cuda/cuda_lesson.h"
#include "lessons/10-inference/inference_lesson.h"
#include "lessons/11-modern/modern_lesson.h"
#include "lessons/12-real-models/real_lesson.h"
#include "lessons/13-control/control_lesson.h"
#include "lessons/14-distributed/distributed_lesson.h"
#include "lessons/15-compression/compression_lesson.h"
#include "kernels/cuda/bench/cublas.h"
#include "lessons/common/cli.h"

namespace {

// How a command runs, once the command line has filled in its options.
using Runner = std::function<int()>;
// Adds a command's flags (or its own subcommands) to its CLI11 app; returns how it runs.
using Mount = std::function<Runner(CLI::App&)>;

struct Command {
  const char* name;
  const char* description;  // the line `nnlab --help` shows
  Mount mount;
};

// A command whose flags fill an Options struct (add) that run then reads: every lesson's,
// `check` and `bench`.
template <typename Options>
Mount with_options(void (*add)(CLI::App&, Options&), int (*run)(const Options&)) {
  return [add, run](CLI::App& cmd) -> Runner {
    auto opts = std::make_shared<Options>();
    add(cmd, *opts);
    return [opts, run] { return run(*opts); };
  };
}

// A command with subcommands of its own (`gpt train`, `cuda bench`): run reads from the
// command's app which one was given.
template <typename Options>
Mount with_subcommands(void (*add)(CLI::App&, Options&), int (*run)(CLI::App&, const Options&)) {
  return [add, run](CLI::App& cmd) -> Runner {
    auto opts = std::make_shared<Options>();
    add(cmd, *opts);
    return [opts, run, &cmd] { return run(cmd, *opts); };
  };
}

const Command kCommands[] = {
    {"lesson01", "Lesson 01: a neuron and an MLP in plain loops", with_options(lesson01::add_options, lesson01::run)},
    {"lesson02", "Lesson 02: backprop and gradient descent; train on Fashion-MNIST",
     with_options(lesson02::add_options, lesson02::run)},
    {"lesson03", "Lesson 03: matmul from loops to SIMD and threads, measured here",
     with_options(lesson03::add_options, lesson03::run)},
    {"lesson04", "Lesson 04: convolutional networks; train a CNN on Fashion-MNIST",
     with_options(lesson04::add_options, lesson04::run)},
    {"lesson05", "Lesson 05: recurrent networks; a character model and a simulated plant",
     with_options(lesson05::add_options, lesson05::run)},
    {"lesson06", "Lesson 06: LSTM; the same tasks, RNN vs LSTM side by side",
     with_options(lesson06::add_options, lesson06::run)},
    {"lesson07", "Lesson 07: attention; causal self-attention in loops, scaled, multi-head, checked",
     with_options(lesson07::add_options, lesson07::run)},
    {"lesson08", "Lesson 08: the GPT; every shape, the memory, the FLOPs; train and sample",
     with_options(lesson08::add_options, lesson08::run)},
    {"lesson09", "Lesson 09: CUDA; the matmul ladder, kernel fusion, the emulator catching bugs",
     with_options(lesson09::add_options, lesson09::run)},
    {"lesson10", "Lesson 10: inference; KV cache, the bandwidth law, quantization, speculative decoding, pruning",
     with_options(lesson10::add_options, lesson10::run)},
    {"lesson11", "Lesson 11: from nanoGPT to a modern LLM; byte-level BPE, RMSNorm, RoPE, SwiGLU, flash attention",
     with_options(lesson11::add_options, lesson11::run)},
    {"lesson12", "Lesson 12: real models; Hugging Face checkpoints in and out, GPT-2 and Llama weights, LoRA",
     with_options(lesson12::add_options, lesson12::run)},
    {"lesson13", "Lesson 13: a network in the control loop; soft sensor, MPC, fault detection, C99 export",
     with_options(lesson13::add_options, lesson13::run)},
    {"lesson14", "Lesson 14: beyond one machine; all-reduce, scaling on ranks, ZeRO-1, recomputation, the cluster model",
     with_options(lesson14::add_options, lesson14::run)},
    {"lesson15", "Lesson 15: compression that changes the arithmetic; int8 GEMM, SmoothQuant W8A8, GPTQ, BitNet, energy",
     with_options(lesson15::add_options, lesson15::run)},
    {"gpt", "The GPT trainer and sampler (lessons 07-08): train, sample, bench, diff",
     with_subcommands(gpt::add_gpt_subcommands, gpt::run_gpt_command)},
    {"generate", "Generate text with any loaded model: a Hugging Face directory or a checkpoint (lesson 12)",
     with_options(gpt::add_generate_options, gpt::run_generate)},
    {"perplexity", "Perplexity and bits per byte of a loaded model on a text (lesson 12)",
     with_options(gpt::add_perplexity_options, gpt::run_perplexity)},
    {"export-hf", "Write an nnlab checkpoint as a Hugging Face model directory (lesson 12)",
     with_options(gpt::add_export_hf_options, gpt::run_export_hf)},
    {"plan", "Plan a run (lesson 14): memory per GPU, GPUs to train and to serve, all-reduce time over a link",
     with_options(gpt::add_plan_options, gpt::run_plan)},
    {"check", "Check your exercises (exercises/), first failure first; hints, --watch, reports", with_options(app::add_check_options, app::run_check)},
    {"bench", "Benchmark kernels: validate every version, then time it, against measured ceilings",
     with_options(app::add_bench_options, app::run_bench)},
    {"cuda", "The CUDA kernels (lesson 09): which device, benchmark every version, check the goals",
     with_subcommands(app::add_cuda_subcommands, app::run_cuda_command)},
    {"energy", "Energy counters (RAPL, NVML): what each reads or why not; --run measures a command's joules",
     with_options(app::add_energy_options, app::run_energy)},
    {"info", "Show what this build can do: compiler, SIMD, threads, CUDA", [](CLI::App&) { return Runner(app::run_info); }},
};

#ifdef NNLAB_HAVE_MPI
// `gpt train --comm nccl` under mpirun (lesson 14): the MPI ranks vote first (a rank left on MPI
// would wait for ever in an all-reduce the others make with NCCL), then each takes the GPU of its
// rank on its node and NCCL starts over MPI. nullptr: the ranks stay on MPI (--comm mpi, or
// another command). Throws with the reason when NCCL was asked for and cannot be had.
std::unique_ptr<kernels::comm::Comm> nccl_comm_if_asked(kernels::comm::Comm& mpi, const CLI::App& train,
                                                        const std::string& engine) {
  float votes = train.parsed() && engine == "nccl" ? 1.0f : 0.0f;
  mpi.allreduce_sum(&votes, 1);
  if (votes == 0.0f) return nullptr;
  if (votes != static_cast<float>(mpi.size())) {
    throw std::runtime_error("--comm nccl was given to " + std::to_string(static_cast<int>(votes)) + " of the " +
                             std::to_string(mpi.size()) + " ranks: start every rank with the same --comm");
  }
  const std::string backend = train.get_option("--backend")->as<std::string>();
  if (backend != "cuda") {
    throw std::runtime_error("--comm nccl sums the gradients in GPU memory: it goes with --backend cuda (this run: "
                             "--backend " + backend + "); the host backends use --comm mpi");
  }
#ifdef NNLAB_HAVE_NCCL
  return kernels::comm::make_nccl_comm(mpi, kernels::comm::launched_local_rank());
#else
  throw std::runtime_error("--comm nccl: this build has no NCCL engine (it needs CUDA, MPI and NCCL when cmake runs: "
                           "NCCL from the CUDA toolkit, or .venv/bin/pip install nvidia-nccl-cu13; cmake's line "
                           "'nnlab: NCCL ...' says what was missing). --comm mpi trains through host memory");
#endif
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nnlab: neural networks from scratch, from loops to a GPT on hand-written kernels.\n"
               "Start with `nnlab lesson01`, read lessons/01-neuron/README.md beside it.",
               "nnlab"};
  app.require_subcommand(1);
  std::vector<std::pair<const CLI::App*, Runner>> commands;
  std::string names;
  for (const Command& c : kCommands) {
    CLI::App* cmd = app.add_subcommand(c.name, c.description);
    commands.emplace_back(cmd, c.mount(*cmd));
    names += (names.empty() ? "" : ", ") + std::string(c.name);
  }
  // The data-parallel engine (lesson 14): a flag of `gpt train`, used here, where the ranks'
  // Comm is made before the command runs (not in a config file: that is read too late for it).
  std::string comm_engine = "mpi";
  CLI::App* train_cmd = app.get_subcommand("gpt")->get_subcommand("train");
  train_cmd->add_option("--comm", comm_engine, "Under mpirun (data parallel, lesson 14): mpi (the gradients summed "
                        "in host memory, any backend) or nccl (with --backend cuda: one GPU per rank, summed by "
                        "NCCL on the GPUs)")
      ->check(CLI::IsMember({"mpi", "nccl"}))->capture_default_str()->configurable(false)->group("Training");

  // CLI11 reports an unknown first word only as "a subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    bool known = false;
    for (const Command& c : kCommands) known = known || first == c.name;
    if (!known) {
      std::cerr << "nnlab: unknown command '" << first << "'. Commands: " << names << ".\n"
                << "Run with --help for more information.\n";
      return 2;
    }
  }
  // The trainer's tf32/bf16 MFU against cuBLAS's rate when it is higher than our own rung's
  // (gpt/backend_cuda.h): the front door links cuBLAS through the bench; the trainer does not.
  gpt::set_tensor_core_peak(&kernels::cuda::bench::tensor_core_peak);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  // Started by mpirun (lesson 14): the ranks train together through MPI (gpt::set_process_comm).
  // A failing rank aborts them all: the others may be waiting for it in an all-reduce.
  // With --comm nccl the ranks start over MPI, then train through NCCL (nccl_comm_if_asked).
  std::unique_ptr<kernels::comm::Comm> mpi;
  std::unique_ptr<kernels::comm::Comm> nccl;  // declared after mpi: destroyed before MPI_Finalize
  if (kernels::comm::launched_ranks() > 1) {
#ifdef NNLAB_HAVE_MPI
    mpi = kernels::comm::make_mpi_comm(&argc, &argv);
    gpt::set_process_comm(mpi.get());
    try {
      nccl = nccl_comm_if_asked(*mpi, *train_cmd, comm_engine);
    } catch (const std::exception& e) {
      // one write per rank, so that the ranks' lines do not interleave
      std::cerr << "nnlab: rank " + std::to_string(mpi->rank()) + " of " + std::to_string(mpi->size()) + ": " + e.what() + "\n";
      kernels::comm::mpi_abort(2);
    }
    if (nccl != nullptr) gpt::set_process_comm(nccl.get());
#else
    std::cerr << "nnlab: started by mpirun as one of " << kernels::comm::launched_ranks()
              << " ranks, but this build has no MPI: every rank would train alone and write the same files. "
                 "Install Open MPI (Debian: sudo apt-get install openmpi-bin libopenmpi-dev, or bash "
                 "scripts/setup.sh), re-run cmake and build again\n";
    return 2;
#endif
  } else if (train_cmd->parsed() && comm_engine == "nccl") {
    std::cerr << "nnlab: --comm nccl: one process, nothing to sum across GPUs; start one rank per GPU with "
                 "mpirun -np <GPUs> nnlab gpt train --backend cuda --comm nccl ...\n";
  }
  const int rc = lessons::run_guarded([&] {
    for (const auto& [cmd, run] : commands) {
      if (*cmd) return run();
    }
    return 2;  // unreachable: require_subcommand(1)
  });
#ifdef NNLAB_HAVE_MPI
  if (rc != 0 && mpi != nullptr) {
    std::cerr << "nnlab: rank " << mpi->rank() << " of " << mpi->size()
              << " failed (the error above): stopping every rank\n";
    kernels::comm::mpi_abort(rc);
  }
#endif
  return rc;
}
