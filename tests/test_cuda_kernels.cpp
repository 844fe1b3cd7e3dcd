// Every version of every CUDA op, validated against its CPU reference (kernels/cuda/bench/ops.h)
// at small sizes: through the emulator in the default test run, and on the GPU when there is
// one (tag [device], ctest label "device"; reported as skipped without a GPU).
#include <catch2/catch.hpp>

#include <iostream>
#include <string>

#include "kernels/cuda/bench/ops.h"

namespace cb = kernels::cuda::bench;

namespace {

// The ops with one version on purpose (kernels/cuda/gpt_ops.cu says why): validated the same
// way, by validate_single_op, which requires exactly one, so a second version moves the op
// to the ladders.
bool single_version(const std::string& name) {
  for (const char* s : {"encoder_forward", "dropout_forward", "multiply", "add", "scale", "crossentropy_loss",
                        "crossentropy_backward"}) {
    if (name == s) return true;
  }
  return false;
}

// Validates every version of `op` at its test sizes on `dev`.
void validate_versions(kernels::cuda::Device& dev, const cb::Op& op, const std::vector<cb::Variant>& variants) {
  REQUIRE_FALSE(op.test_sizes.empty());
  uint64_t seed = 1;
  for (const std::string& size : op.test_sizes) {
    const auto problem = op.make(dev, size, seed++);
    for (size_t v = 0; v < variants.size(); ++v) {
      if (variants[v].info.min_sm > dev.info().sm) {
        WARN(op.name << " " << variants[v].info.id << " needs compute capability " << variants[v].info.min_sm
                     << ": not run on " << dev.info().name);
        continue;
      }
      INFO(op.name << " " << variants[v].info.id << " (" << variants[v].info.name << ") at " << problem->shape());
      const kernels::harness::Check c = problem->validate(v);
      INFO(c.report);
      CHECK(c.ok());
    }
  }
}

// Validates every version (and peer) of `name` at its test sizes on `dev`.
void validate_op(kernels::cuda::Device& dev, const std::string& name) {
  const cb::Op& op = cb::op(name);
  const std::vector<cb::Variant> variants = op.variants(dev);
  INFO(op.name << " on " << dev.info().name);
  REQUIRE(variants.size() >= 2);  // a ladder has rungs
  validate_versions(dev, op, variants);
}

// The same for an op with a single version (see single_version).
void validate_single_op(kernels::cuda::Device& dev, const std::string& name) {
  const cb::Op& op = cb::op(name);
  const std::vector<cb::Variant> variants = op.variants(dev);
  INFO(op.name << " on " << dev.info().name);
  REQUIRE(single_version(name));
  REQUIRE(variants.size() == 1);
  validate_versions(dev, op, variants);
}

}  // namespace

TEST_CASE("cuda emu: matmul ladder", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "matmul"); }
TEST_CASE("cuda emu: cos2 fusion", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "cos2"); }
TEST_CASE("cuda emu: softmax", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "softmax"); }
TEST_CASE("cuda emu: layernorm forward", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "layernorm_forward");
}
TEST_CASE("cuda emu: layernorm backward", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "layernorm_backward");
}
TEST_CASE("cuda emu: residual + layernorm", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "residual_layernorm");
}
TEST_CASE("cuda emu: gelu", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "gelu"); }
TEST_CASE("cuda emu: bias + gelu", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "bias_gelu"); }
TEST_CASE("cuda emu: cross-entropy", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "crossentropy"); }
TEST_CASE("cuda emu: adamw", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "adamw"); }
TEST_CASE("cuda emu: attention", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "attention"); }
TEST_CASE("cuda emu: gemm", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "gemm"); }
TEST_CASE("cuda emu: bias backward", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "bias_backward"); }

TEST_CASE("cuda emu: encoder forward", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "encoder_forward");
}
TEST_CASE("cuda emu: encoder backward", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "encoder_backward");
}
TEST_CASE("cuda emu: gelu backward", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "gelu_backward"); }
TEST_CASE("cuda emu: dropout forward", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "dropout_forward");
}
TEST_CASE("cuda emu: multiply", "[cuda][emu-kernels]") { validate_single_op(kernels::cuda::emulator(), "multiply"); }
TEST_CASE("cuda emu: add", "[cuda][emu-kernels]") { validate_single_op(kernels::cuda::emulator(), "add"); }
TEST_CASE("cuda emu: scale", "[cuda][emu-kernels]") { validate_single_op(kernels::cuda::emulator(), "scale"); }
TEST_CASE("cuda emu: cross-entropy loss", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "crossentropy_loss");
}
TEST_CASE("cuda emu: cross-entropy backward", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "crossentropy_backward");
}
TEST_CASE("cuda emu: sum", "[cuda][emu-kernels]") { validate_op(kernels::cuda::emulator(), "sum"); }
TEST_CASE("cuda emu: attention backward", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "attention_backward");
}

TEST_CASE("cuda gpu: every op's versions on the GPU", "[cuda][device]") {
  std::string why;
  kernels::cuda::Device* gpu = kernels::cuda::gpu(&why);
  if (!gpu) {
    std::cout << "SKIPPED: no GPU (" << why << ")\n";
    return;
  }
  for (const cb::Op& op : cb::ops()) {
    SECTION(op.name) {
      if (single_version(op.name)) {
        validate_single_op(*gpu, op.name);
      } else {
        validate_op(*gpu, op.name);
      }
    }
  }
}
