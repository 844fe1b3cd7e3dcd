// Tests of exercise 33_training_memory. Sums done by hand: 16 bytes a parameter without ZeRO,
// each stage's per-rank bytes for 7e9 parameters on 8 ranks in mixed precision and 1e9 on 4 in
// fp32, one rank holding everything at every stage; the usual mistakes named (sharding the
// stages in the wrong order, mixed precision's optimizer state as 8 bytes).
#include <catch2/catch.hpp>

#include "exercises/33_training_memory/training_memory.h"
#include "exercises/test_util.h"

using ex::Precision;

TEST_CASE("bytes_per_rank: 16 bytes a parameter without ZeRO, in fp32 and mixed", "[ex33]") {
  for (Precision p : {Precision::fp32, Precision::mixed}) {
    const double got = ex::bytes_per_rank(7e9, p, 0, 8);
    INFO((p == Precision::mixed ? "mixed" : "fp32") << ", 7e9 parameters, stage 0 on 8 ranks: got " << got
                                                     << ", want 112e9 (every rank holds everything)");
    CHECK(ex_test::close(got, 112e9, 0, 1e-12));
  }
}

TEST_CASE("bytes_per_rank: ZeRO stages 1-3, by hand", "[ex33]") {
  // 7e9 parameters, mixed, 8 ranks: weights 14e9, gradients 14e9, optimizer 84e9 bytes
  const double mixed_want[4] = {112e9, 14e9 + 14e9 + 84e9 / 8, 14e9 + (14e9 + 84e9) / 8, 112e9 / 8};
  for (int s = 0; s <= 3; ++s) {
    const double got = ex::bytes_per_rank(7e9, Precision::mixed, s, 8);
    INFO("mixed, 7e9 parameters, stage " << s << " on 8 ranks: got " << got << ", want " << mixed_want[s]);
    if (s == 1 && ex_test::close(got, 14e9 / 8 + 14e9 + 84e9, 0, 1e-12))
      FAIL("Likely cause: stage 1 sharded the weights; it shards the optimizer state (stage 3 the weights)");
    if (s == 1 && ex_test::close(got, 14e9 + 14e9 + 56e9 / 8, 0, 1e-12))
      FAIL("Likely cause: mixed precision's optimizer state is 12 bytes (fp32 master weights + m + v), not 8");
    CHECK(ex_test::close(got, mixed_want[s], 0, 1e-12));
  }
  // 1e9 parameters, fp32, 4 ranks: weights 4e9, gradients 4e9, m and v 8e9
  const double fp32_want[4] = {16e9, 8e9 + 2e9, 4e9 + 3e9, 4e9};
  for (int s = 0; s <= 3; ++s) {
    const double got = ex::bytes_per_rank(1e9, Precision::fp32, s, 4);
    INFO("fp32, 1e9 parameters, stage " << s << " on 4 ranks: got " << got << ", want " << fp32_want[s]);
    CHECK(ex_test::close(got, fp32_want[s], 0, 1e-12));
  }
}

TEST_CASE("bytes_per_rank: one rank holds everything at every stage, and more ranks never cost more", "[ex33]") {
  for (int s = 0; s <= 3; ++s) {
    INFO("stage " << s);
    CHECK(ex_test::close(ex::bytes_per_rank(3e9, Precision::mixed, s, 1), 48e9, 0, 1e-12));
    CHECK(ex::bytes_per_rank(3e9, Precision::fp32, s, 64) <= ex::bytes_per_rank(3e9, Precision::fp32, s, 2));
    CHECK(ex::bytes_per_rank(3e9, Precision::fp32, s, 2) > 0);
  }
}
