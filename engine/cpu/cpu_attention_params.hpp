// What CPU attention reads and the rules its dispatcher (cpu_attention.cpp) and its AVX-512 kernel
// (cpu_attention_avx512.cpp) share: the paged KV cache's element type and layout, a layer's
// AttentionParams, the one multiply-add both compute with, and the sizes of attend_row's scratch and of
// exp_weights' lanes. The backend sizes and fills its cache from here (cpu_backend.hpp).
#pragma once
#include <cmath>
#include <cstdint>

namespace cbatch {

// What the CPU's KV cache holds per element: fp32, or bf16 (f32_to_bf16, tensor.hpp), which halves the
// bytes attention reads and the cache's memory; attention then computes in fp32 on the bf16 values widened
// exactly (bf16_to_f32), so that with either type the arithmetic is the same.
enum class KvElement : uint8_t { kF32, kBf16 };
inline int kv_element_bytes(KvElement e) { return e == KvElement::kBf16 ? 2 : 4; }

// The paged KV cache of one layer, slot = block * block_size + offset, each element a float or a bf16
// (uint16_t) as `element` says. V is (num_slots, kv_dim), a slot's row whole; K is (num_blocks, kv_dim,
// block_size), each block's positions side by side per element (k_cache_index), so that a query's scores
// of consecutive positions are one vector's lanes.
inline int64_t k_cache_index(int64_t slot, int element, int kv_dim, int block_size) {
  return (slot - slot % block_size) * kv_dim + static_cast<int64_t>(element) * block_size + slot % block_size;
}
struct PagedKv {
  const void* k = nullptr;
  const void* v = nullptr;
  int kv_dim = 0;
  int block_size = 0;
  KvElement element = KvElement::kF32;
};

// How a layer attends: scores are q.k * scale, softcapped when softcap > 0; a query at position pos sees
// keys max(0, pos - window + 1)..pos when window > 0 (its own included), else 0..pos. With sinks, q head
// h's sink logit sinks[h] joins its softmax: in the max and the denominator, weighting no value.
struct AttentionParams {
  int head_dim = 0;
  float scale = 0.0f;
  float softcap = 0.0f;
  int window = 0;
  const float* sinks = nullptr;  // (num_heads) or nullptr
  float sink(int head) const { return sinks != nullptr ? sinks[head] : -INFINITY; }
  int first_key(int pos) const { return window > 0 && pos >= window ? pos - window + 1 : 0; }
};

// Lanes of exp_weights' sum (cpu_attention.hpp), which the AVX-512 kernel takes 16 at a time.
constexpr int kExpWeightLanes = 16;

// a * b + c as attention computes it: one fused multiply-add where the build's CPU has one
// (CBATCH_ATTENTION_FMA), else the product rounded and then added (the AVX-512 kernel, compiled for a CPU
// with FMA, then hides its products from the compiler's contraction). Written out, so that neither the
// compiler's contraction setting nor whether it vectorizes a loop (its vector body and scalar remainder used
// to differ) changes the bits; the AVX-512 kernel (cpu_attention_avx512.cpp) does the same.
#if defined(__FP_FAST_FMAF) || defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define CBATCH_ATTENTION_FMA 1
#endif
inline float attention_mul_add(float a, float b, float c) {
#if defined(CBATCH_ATTENTION_FMA)
  return std::fma(a, b, c);
#else
  return a * b + c;  // no fused multiply-add in this build's instruction set: nothing to contract
#endif
}

// attend_row's scratch (cpu_attention.hpp): floats for num_heads heads at position pos.
inline int64_t attend_row_scratch(int num_heads, int pos) { return static_cast<int64_t>(num_heads) * (pos + 3); }
// The most rows attend_rows takes at once.
constexpr int kMaxAttendRows = 2;

}  // namespace cbatch
