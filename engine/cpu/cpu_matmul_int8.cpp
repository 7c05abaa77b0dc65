// The 8-bit integer path of the CPU matmul (layout and arithmetic: cpu_matmul_int8.hpp), its dispatcher:
// activation quantization, the instruction set this CPU runs (cpuid, once), and the run-time choice of
// kernel: the scalar reference (cpu_int8_scalar.cpp), AVX2 (cpu_int8_avx2.cpp) or AVX-512 VNNI
// (cpu_int8_avx512.cpp), all of the same bits. The vector kernels are compiled for their instruction sets
// with target attributes, so one binary runs on either CPU. Packing: cpu_int8_pack.cpp.
#include "engine/cpu/cpu_matmul_int8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_int8_kernels.hpp"

#if defined(__x86_64__)
#include <cpuid.h>  // __get_cpuid, bit_F16C
#define CBATCH_INT8_X86 1
#endif

namespace cbatch::matmul_detail {
namespace {

// n k of an activation row in steps of d: q = round(x / d) (ties to even) within +-127, sums of q per 16.
void quantize_block(const float* xb, int n, float d, int8_t* q, int32_t* sums) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; i += 16) {
    int32_t sum = 0;
    for (int j = i; j < i + 16; ++j) {
      const auto v = static_cast<int8_t>(std::clamp(std::nearbyint(xb[j] * id), -127.0f, 127.0f));
      q[j] = v;
      sum += v;
    }
    sums[i / 16] = sum;
  }
}

float abs_max(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// A 256-block's sums of q per 32 k, split as Q8Rows::split_sums says.
void split_block_sums(const int32_t* sums, int32_t* split) {
  uint8_t bytes[16];
  for (int j = 0; j < 8; ++j) {
    const int32_t s = sums[2 * j] + sums[2 * j + 1];
    bytes[j] = static_cast<uint8_t>(s >> 7);  // in [-32, 31]
    bytes[8 + j] = static_cast<uint8_t>(s & 127);
  }
  std::memcpy(split, bytes, sizeof(bytes));
}

#if defined(CBATCH_INT8_X86)
// F16C (the fp16 scales' conversions) from CPUID leaf 1: clang's __builtin_cpu_supports has no "f16c".
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

Int8Isa detect_isa() {
#if defined(CBATCH_INT8_X86)
  __builtin_cpu_init();
  if (kLanes == 16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni")) {
    return Int8Isa::kAvx512Vnni;
  }
  const Int8Isa isa = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()
                          ? Int8Isa::kAvx2
                          : Int8Isa::kScalar;
  std::fprintf(stderr, "[cbatch] %s: 8-bit products run on %s\n",
               kLanes == 16 ? "this CPU has no AVX-512 VNNI" : "built without AVX-512 (8-lane panels)",
               int8_isa_name(isa));
  return isa;
#else
  return Int8Isa::kScalar;
#endif
}

}  // namespace

void quantize_rows_q8(const float* x, int64_t m, int64_t k, int block, Q8Rows& out) {
  if (block != kGroupK && block != kSuperK) throw Error("internal error: activation blocks are of 32 or 256");
  out.rows = m;
  out.cols = k;
  out.block = block;
  const auto need = static_cast<size_t>(m * k);
  if (out.q.size() < need) out.q.resize(need);
  if (out.d.size() < need / block) out.d.resize(need / block);
  if (out.sums.size() < need / 16) out.sums.resize(need / 16);
  if (block == kSuperK && out.split_sums.size() < need / kSuperK * 4) out.split_sums.resize(need / kSuperK * 4);
  auto* quantize = &quantize_block;
  auto* amax = &abs_max;
#if defined(CBATCH_INT8_X86)
  if (int8_isa() == Int8Isa::kAvx512Vnni) {
    quantize = &quantize_block_avx512;
    amax = &abs_max_avx512;
  }
#endif
  for (int64_t b = 0; b < m * (k / block); ++b) {
    out.d[static_cast<size_t>(b)] = amax(x + b * block, block) / 127.0f;
    int32_t* sums = out.sums.data() + b * (block / 16);
    quantize(x + b * block, block, out.d[static_cast<size_t>(b)], out.q.data() + b * block, sums);
    if (block == kSuperK) split_block_sums(sums, out.split_sums.data() + 4 * b);
  }
}

bool can_run(Int8Isa isa) {
#if defined(CBATCH_INT8_X86)
  __builtin_cpu_init();
  if (isa == Int8Isa::kAvx512Vnni) {
    return kLanes == 16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }
  if (isa == Int8Isa::kAvx2) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  }
#endif
  return isa == Int8Isa::kScalar;
}

Int8Isa int8_isa() {
  static const Int8Isa isa = detect_isa();
  return isa;
}

const char* int8_isa_name(Int8Isa isa) {
  switch (isa) {
    case Int8Isa::kAvx512Vnni: return "AVX-512 VNNI";
    case Int8Isa::kAvx2: return "AVX2";
    case Int8Isa::kScalar: break;
  }
  return "scalar code";
}

void matmul_int8_panels(Int8Isa isa, DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                        const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                        float* y, int64_t ldy, int64_t n) {
  if (x.block != q8_block(dtype)) {
    throw Error("internal error: activations quantized per " + std::to_string(x.block) + " k for these int8 panels");
  }
#if defined(CBATCH_INT8_X86)
  if (isa == Int8Isa::kAvx512Vnni && kLanes == 16) {
    return run_int8_panels_avx512_vnni(dtype, planes, x, row_begin, row_end, panels, panel_bytes, panel_begin,
                                       panel_end, y, ldy, n);
  }
  if (isa != Int8Isa::kScalar) {  // AVX2, or AVX-512 VNNI in a build of 8-lane panels
    return run_int8_panels_avx2(dtype, planes, x, row_begin, row_end, panels, panel_bytes, panel_begin, panel_end,
                                y, ldy, n);
  }
#endif
  run_int8_panels_scalar(dtype, planes, x, row_begin, row_end, panels, panel_bytes, panel_begin, panel_end, y, ldy,
                         n);
}

}  // namespace cbatch::matmul_detail
