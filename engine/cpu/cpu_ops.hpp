// The CPU backend's elementwise, normalization, RoPE and attention operations, in fp32. Each one
// computes a row from that row's inputs only, in a fixed order, so results do not depend on batching.
// These are also the references the CUDA kernels are tested against.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/model/model_config.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

// out (dim) = x / sqrt(mean(x^2) + eps) * weight
void rmsnorm_row(const float* x, const float* weight, float* out, int dim, float eps);
// out (dim) = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias (LayerNorm; out may be x)
void layernorm_row(const float* x, const float* weight, const float* bias, float* out, int dim, float eps);

// cos and sin (head_dim / 2 each) of the rotation at position pos; inv_freq: (head_dim / 2).
void rope_angles(int pos, const float* inv_freq, int head_dim, float* cos_out, float* sin_out);
// Rotates one head vector (head_dim) in place by the angles of rope_angles.
void rope_head(float* v, int head_dim, const float* cos, const float* sin, RopeLayout layout);

// The gated FFN's activation: SwiGLU, GeGLU, or the clamped SwiGLU with its limit and slope (gpt-oss).
struct GluParams {
  GluParams(Activation kind = Activation::kSilu, float limit = 0.0f, float alpha = 1.0f)  // NOLINT: implicit
      : kind(kind), limit(limit), alpha(alpha) {}
  Activation kind;
  float limit;  // kSwigluClamped: gate clamped above at limit, up to [-limit, limit]
  float alpha;  // kSwigluClamped: slope of the sigmoid
};
inline GluParams glu_params(const ModelConfig& c) { return {c.activation, c.swiglu_limit, c.swiglu_alpha}; }

// gate_up: (2 * hidden) = [gate | up]; out (hidden) = act(gate) * up, act silu (SwiGLU) or tanh-GELU (GeGLU);
// clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit), out = (u + 1) * g * sigmoid(alpha * g).
void gated_ffn_row(const float* gate_up, float* out, int hidden, const GluParams& glu);
// The same, elementwise, on `count` columns of one row: out[i] = act(gate[i]) * up[i] (a row's columns can
// be split across threads, each element computed as gated_ffn_row computes it).
void gated_ffn_cols(const float* gate, const float* up, float* out, int count, const GluParams& glu);
float gelu_tanh(float x);  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), tanh by tanh_fp32
// e^x rounded to fp32, the same bits on every C library and instruction set (cpu_exp.hpp: in double by
// range reduction and the Taylor series of expm1), within about 1e-16 of e^x before the rounding, so
// correctly rounded but where e^x lies that close to a midpoint of two floats; SiLU's and attention's
// exponential (libm's expf is not correctly rounded everywhere, nor the same on every C library).
float exp_fp32(float x);
// tanh x rounded to fp32, the same bits on every C library and instruction set (cpu_exp.hpp: expm1
// in double by range reduction and its Taylor series), within about 1e-16 of tanh before the rounding, so
// correctly rounded but where tanh x lies that close to a midpoint of two floats; no libm call, so loops
// over it vectorize (libm's tanhf does not).
float tanh_fp32(float x);
float gelu_erf(float x);   // 0.5 x (1 + erf(x / sqrt(2)))
// A plain (non-gated) FFN's activation: out (hidden) = act(up + bias), act GELU (erf or tanh) or silu.
void plain_ffn_row(const float* up, const float* bias, float* out, int hidden, Activation activation);

// argmax_row's answer (sampler.hpp: the first index of the largest value, NaNs never winning, 0 when
// values[0] is NaN) in two passes the compiler vectorizes: the largest value, then its first index.
int32_t first_argmax(const float* values, int n);

// values (n) become cap * tanh(values / cap): Gemma 2's softcapping of scores and logits.
void softcap_row(float* values, int n, float cap);

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

// Attention's softmax numerators of `count` scores: s[i] = exp_fp32(s[i] - max); returns their sum, taken
// in kExpWeightLanes lanes (s[i] added to lane i % 16 in order), the lanes then added by halves (lane j +=
// lane j + 8, then + 4, + 2, + 1), so that it vectorizes with its bits fixed (attend_row's AVX-512 kernel
// computes the same, 16 at a time).
constexpr int kExpWeightLanes = 16;
float exp_weights(float* s, int count, float max);

// Attention of one query head vector q (head_dim) over the keys it sees (AttentionParams) of a sequence
// whose blocks are block_table; reads kv head `kv_head`; `sink` is the head's sink logit (-inf: none, the
// same bits as without). scratch: (pos + 1) floats. out: (head_dim).
void attend_head(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int kv_head,
                 const AttentionParams& params, float* scratch, float* out, float sink = -INFINITY);

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

// All num_heads query heads of one row (q: num_heads * head_dim) at once: each cached position's K and
// V rows are read once for every head (kv head h / (num_heads / num_kv_heads)). Per head the arithmetic
// and its order are attend_head's, so out (num_heads * head_dim) is bit-identical to calling attend_head
// head by head. scratch: attend_row_scratch(num_heads, pos) floats.
void attend_row(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int num_heads,
                int num_kv_heads, const AttentionParams& params, float* scratch, float* out);
inline int64_t attend_row_scratch(int num_heads, int pos) { return static_cast<int64_t>(num_heads) * (pos + 3); }

// attend_row of up to kMaxAttendRows rows of one sequence (one block table) at once: row t's query heads at
// q + t * q_stride and position pos[t], its out at out + t * out_stride, each bit-identical to attend_row's.
// The rows share each K and V row's reads (a prompt's rows of a chunk: the keys one reads are the next's).
// scratch: count * attend_row_scratch(num_heads, the largest pos) floats.
constexpr int kMaxAttendRows = 2;
void attend_rows(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table, const int* pos,
                 int count, int num_heads, int num_kv_heads, const AttentionParams& params, float* scratch, float* out,
                 int64_t out_stride);

}  // namespace cbatch
