// scripts/gpt_step_cputime.cpp: the GPT training step of the cpu backend (nanoGPT's CPU
// config, gpt::TrainOptions' defaults), timed by PROCESS CPU time: on a machine other jobs
// share, wall time swings with the neighbours, while the CPU time of a 1-thread step is its
// work. Meaningful with OMP_NUM_THREADS=1 only. Prints the minimum over 5 runs of N steps
// of CPU ms per step; each run includes building the model (gpt::time_train_step), a small
// upward bias. Build and run (after the release build; the scripts/gpt_torch.py peer prints
// its CPU time per iteration beside its wall time):
//   L=build/release; g++ -O2 -std=c++20 -march=native -fopenmp -I. scripts/gpt_step_cputime.cpp \
//     $L/gpt/libnnlab_gpt.a $L/kernels/libnnlab_kernels_bench.a $L/kernels/cuda/libnnlab_cuda_bench.a \
//     $L/nn/libnnlab_nn.a $L/kernels/cuda/libnnlab_cuda.a $L/kernels/cuda/libnnlab_cuda_emu.a \
//     $L/kernels/cuda/libnnlab_cuda_hw.a $L/nn/libnnlab_nn.a $L/kernels/libnnlab_kernels.a $L/io/libnnlab_io.a \
//     -lz -lgomp -lpthread -L/usr/local/cuda/lib -lcudart -lcublas -lcublasLt -lopenblas \
//     -Wl,-rpath,/usr/local/cuda/lib -o gpt_step_cputime     (drop the cuda libraries in a build without CUDA)
//   OMP_NUM_THREADS=1 ./gpt_step_cputime 10
#include <time.h>
#include <cstdio>
#include <cstdlib>
#include "gpt/bench.h"
static double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20;
  gpt::TrainOptions o;
  gpt::time_train_step(o, "cpu", 1, 3);  // warm
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    double c0 = cpu_now();
    gpt::time_train_step(o, "cpu", iters, 0);
    double c = (cpu_now() - c0) / iters * 1e3;
    if (c < best) best = c;
  }
  printf("cpu ms/step (min of 5 x %d steps, includes model setup): %.2f\n", iters, best);
}
