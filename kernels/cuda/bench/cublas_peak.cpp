// kernels/cuda/bench/cublas_peak.cpp: cuBLAS's rate on a square product, the tensor-core peak
// the GPT trainer's MFU is measured against (kernels/cuda/bench/cublas.h). Built with or
// without nvcc: without it cublas_available() says so and the rate is 0.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/bench/cublas.h"
#include "kernels/harness.h"

namespace kernels::cuda::bench {

double cublas_peak_flops(Device& dev, CublasMath math, int n, std::string* what) {
  std::string why;
  if (!cublas_available(dev, &why)) {
    if (what) *what = "cuBLAS not measured: " + why;
    return 0.0;
  }
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<float> host(count);
  kernels::harness::fill_random(host, 2);  // random data: zeros can run faster than real operands
  Array<float> a(dev, count), b(dev, count), c(dev, count, kernels::uninitialized);
  a.upload(host);
  b.upload(host);
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    const double ms = dev.time_ms([&] { cublas_gemm(c.data(), a.data(), b.data(), n, n, n, {}, nullptr, math); });
    if (i > 0) best = std::min(best, ms);  // the first run warms up (and creates cuBLAS's workspace)
  }
  const char* name = math == CublasMath::bf16 ? "cuBLAS GEMM (BF16)" : math == CublasMath::tf32 ? "cuBLAS GEMM (TF32)"
                                                                                                 : "cuBLAS SGEMM";
  if (what) *what = std::string(name) + " at " + std::to_string(n) + "^3 on " + dev.info().name + ", measured now";
  return 2.0 * n * n * static_cast<double>(n) / (best / 1e3);
}

double tensor_core_peak(Device& dev, const std::string& precision, std::string* what) {
  if (precision != "tf32" && precision != "bf16") {
    if (what) *what = "no tensor-core peak for precision " + precision;
    return 0.0;
  }
  return cublas_peak_flops(dev, precision == "bf16" ? CublasMath::bf16 : CublasMath::tf32, 4096, what);
}

}  // namespace kernels::cuda::bench
