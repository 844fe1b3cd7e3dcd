// scripts/decode_bits_before_after.cpp (run by scripts/decode_bits_before_after.sh): hashes the
// output and cache bits of attention_decode v1, v2 (NKV = NH) and v3 on fixed inputs. Built once
// against the kernels of a starting commit (-DOLD: the signature without NKV) and once against
// the working tree: the v1 and v2 lines must be identical, and v3 the same bits as v2.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#include "kernels/decode.h"
#include "kernels/splitmix64.h"
static uint64_t hash_bits(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  for (float f : v) { uint32_t u; std::memcpy(&u, &f, 4); h = (h ^ u) * 1099511628211ull; }
  return h;
}
int main() {
  struct S { int B, n, pos, C, NH; } sizes[] = {{1, 1, 1023, 768, 12}, {4, 1, 300, 384, 6}, {2, 3, 70, 36, 3}, {1, 4, 0, 64, 2}, {3, 2, 500, 192, 12}};
  for (const S& s : sizes) {
    const int maxT = s.pos + s.n + 1;
    std::vector<float> qkv((size_t)s.B * s.n * 3 * s.C), k0((size_t)s.B * maxT * s.C), v0(k0.size());
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = (float)((double)(kernels::splitmix64(1, i) >> 40) / (1 << 23) - 1.0);
    for (size_t i = 0; i < k0.size(); ++i) { k0[i] = (float)((double)(kernels::splitmix64(2, i) >> 40) / (1 << 23) - 1.0); v0[i] = (float)((double)(kernels::splitmix64(3, i) >> 40) / (1 << 23) - 1.0); }
    for (int v = 1; v <= 3; ++v) {
#ifdef OLD
      if (v == 3) break;
#endif
      std::vector<float> kc = k0, vc = v0, out((size_t)s.B * s.n * s.C);
#ifdef OLD
      (v == 1 ? kernels::attention_decode_v1 : kernels::attention_decode_v2)(out.data(), kc.data(), vc.data(), qkv.data(), s.B, s.n, s.pos, s.C, s.NH, maxT);
#else
      (v == 1 ? kernels::attention_decode_v1 : v == 2 ? kernels::attention_decode_v2 : kernels::attention_decode_v3)(out.data(), kc.data(), vc.data(), qkv.data(), s.B, s.n, s.pos, s.C, s.NH, s.NH, maxT);
#endif
      std::printf("B=%d n=%d pos=%d C=%d NH=%d v%d out %016llx k %016llx v %016llx\n", s.B, s.n, s.pos, s.C, s.NH, v, (unsigned long long)hash_bits(out), (unsigned long long)hash_bits(kc), (unsigned long long)hash_bits(vc));
    }
  }
}
