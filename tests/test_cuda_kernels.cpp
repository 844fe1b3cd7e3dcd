// Every version of every CUDA op, validated against its CPU reference (kernels/cuda/bench/ops.h)
// at small sizes: through the emulator in the default test run, and on the GPU when there is
// one (tag [device], ctest label "device"; reported as skipped without a GPU).
#include <catch2/catch.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/device.h"
#include "kernels/harness.h"
#include "nn/transformer.h"

namespace cb = kernels::cuda::bench;

namespace {

// The ops with one version on purpose (kernels/cuda/gpt_ops.cu says why): validated the same
// way, by validate_single_op, which requires exactly one, so a second version moves the op
// to the ladders.
bool single_version(const std::string& name) {
  for (const char* s : {"encoder_forward", "dropout_forward", "multiply", "add", "scale", "crossentropy_loss",
                        "crossentropy_backward", "rope_forward", "rope_backward", "swiglu_forward", "swiglu_backward"}) {
    if (name == s) return true;
  }
  return false;
}

// Validates every version of `op` at its test sizes on `dev`.
void validate_versions(kernels::cuda::Device& dev, const cb::Op& op, const std::vector<cb::Variant>& variants) {
  REQUIRE_FALSE(op.test_sizes.empty());
  uint64_t seed = 1;
  std::vector<int> validated(variants.size(), 0);  // sizes each variant was validated at
  for (const std::string& size : op.test_sizes) {
    const auto problem = op.make(dev, size, seed++);
    for (size_t v = 0; v < variants.size(); ++v) {
      if (variants[v].needs.min_sm > dev.info().sm) {
        WARN(op.name << " " << variants[v].id << " needs compute capability " << variants[v].needs.min_sm
                     << ": not run on " << dev.info().name);
        validated[v] = -1;  // not expected to run here
        continue;
      }
      // A variant that does not compute this form at all (matmul's lesson rungs at a
      // transposed, biased or accumulating size) is skipped, and only such a one.
      const std::string unsupported = problem->unsupported(v);
      if (!unsupported.empty()) {
        CHECK(variants[v].needs.plain_only);
        continue;
      }
      INFO(op.name << " " << variants[v].id << " (" << variants[v].name << ") at " << problem->shape());
      const kernels::harness::Check c = problem->validate(v);
      INFO(c.report);
      CHECK(c.ok());
      ++validated[v];
    }
  }
  // Every variant that can run here was validated at some size (the skips above cannot
  // empty a variant's list).
  for (size_t v = 0; v < variants.size(); ++v) {
    INFO(op.name << " " << variants[v].id);
    CHECK(validated[v] != 0);
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
// The trainer's forms (transposes, bias, accumulate) run on v1 and v9-v11 (validated above at
// the matmul op's worded test sizes); lesson 09's rungs v2-v8 compute the plain product only,
// and refuse the other forms rather than compute something else.
TEST_CASE("cuda emu: matmul's lesson rungs refuse a form they do not compute", "[cuda][emu-kernels]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  const auto& table = dev.kernels().matmul;
  REQUIRE(table.size() >= 11);
  kernels::Array<float> a(dev, 16, kernels::uninitialized), b(dev, 16, kernels::uninitialized),
      c(dev, 16, kernels::uninitialized), bias(dev, 4, kernels::uninitialized);
  a.fill_bytes(0);
  b.fill_bytes(0);
  bias.fill_bytes(0);
  kernels::cuda::MatmulArgs forms[4];
  forms[0].trans_a = true;
  forms[1].trans_b = true;
  forms[2].accumulate = true;
  forms[3].bias = bias.data();
  int plain_only = 0;
  for (const auto& v : table) {
    INFO("matmul " << v.id());
    if (!v.needs.plain_only) continue;
    ++plain_only;
    for (const auto& args : forms) {
      CHECK_THROWS_AS(v.fn(c.data(), a.data(), b.data(), 4, 4, 4, args), kernels::cuda::Error);
    }
    v.fn(c.data(), a.data(), b.data(), 4, 4, 4, {});  // the plain product runs
  }
  CHECK(plain_only == 7);  // v2-v8
  CHECK_FALSE(table.front().needs.plain_only);  // v1, the reference, computes every form
}
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
// The bench checks the kernel's mask against the mask's definition written out in the bench
// (kernels/ knows nothing of nn/); here the kernel's mask and output are checked against
// nn::dropout_forward itself, bit for bit: the mask the naive and cpu backends draw.
TEST_CASE("cuda emu: dropout draws nn::dropout_forward's mask, bit for bit", "[cuda][emu-kernels]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  const auto& table = dev.kernels().dropout_forward;
  REQUIRE(table.size() == 1);
  const size_t n = 1003;  // not a multiple of a block
  std::vector<float> x(n);
  kernels::harness::fill_random(x, 7, -1.0f, 1.0f);
  for (const float p : {0.0f, 0.1f, 0.5f}) {
    const uint64_t seed = 0x1234567890ABCDEFull + static_cast<uint64_t>(p * 100);
    std::vector<float> want_out(n), want_mask(n);
    nn::dropout_forward(want_out.data(), want_mask.data(), x.data(), static_cast<int64_t>(n), p, seed);
    kernels::Array<float> in(dev, x, kernels::uninitialized), out(dev, n, kernels::uninitialized),
        mask(dev, n, kernels::uninitialized);
    table[0].fn(out.data(), mask.data(), in.data(), n, p, seed);
    dev.synchronize();
    INFO("p = " << p);
    CHECK(mask.to_vector() == want_mask);
    CHECK(out.to_vector() == want_out);
  }
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

// the modern (Llama) block (issue 21)
TEST_CASE("cuda emu: rmsnorm forward", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "rmsnorm_forward");
}
TEST_CASE("cuda emu: rmsnorm backward", "[cuda][emu-kernels]") {
  validate_op(kernels::cuda::emulator(), "rmsnorm_backward");
}
TEST_CASE("cuda emu: rope forward", "[cuda][emu-kernels]") { validate_single_op(kernels::cuda::emulator(), "rope_forward"); }
TEST_CASE("cuda emu: rope backward", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "rope_backward");
}
TEST_CASE("cuda emu: swiglu forward", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "swiglu_forward");
}
TEST_CASE("cuda emu: swiglu backward", "[cuda][emu-kernels]") {
  validate_single_op(kernels::cuda::emulator(), "swiglu_backward");
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
