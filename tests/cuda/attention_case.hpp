// The attention tests' batch (test_paged_attention.cpp on the GPU, test_decode_emulated.cpp on the host):
// a chunked prefill continuing an existing cache, a prefill from position 0, decodes (one at position 0,
// one past 700), and a padding row that repeats a cached position; blocks scattered through the cache,
// unused slots NaN (a kernel must never read them), and the reference output of every row, scored as the
// case's AttentionScoring says (Llama's by default; a window, a softcap and a query scale of their own),
// over a cache in T or (Fp8KvScales) over an FP8 cache's dequantized values, with or without attention
// sinks (one fp32 logit per q head, drawn so that some heads' sinks take most of the weight).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <random>
#include <vector>

#include "cuda/attention/kv_cache_dtype.hpp"
#include "engine/model/fp8.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

struct AttnSeq {
  int context;                     // cache positions 0..context-1 hold k and v
  std::vector<int> row_positions;  // this step's query rows
};

inline std::vector<int> range(int begin, int end) {
  std::vector<int> v(static_cast<size_t>(end - begin));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

inline std::vector<AttnSeq> mixed_batch() {
  return {
      {57, range(20, 57)},    // chunked prefill on top of 20 cached positions
      {101, {100}},           // decode
      {70, range(0, 70)},     // prefill from the start
      {1, {0}},               // decode of a one-token sequence
      {9, {5}},               // padding row: repeats cached position 5
      {150, range(0, 150)},   // longer prefill, many key tiles
      {701, {700}},           // long decode
  };
}

// An FP8 cache's scales (cuda/attention/kv_cache_dtype.hpp) for a case: its k and v are drawn, rounded to the E4M3
// codes of value / scale, and hold the dequantized values (code * scale, in fp32) that the reference sees.
// Not powers of two, so that a kernel that loses a scale fails.
struct Fp8KvScales {
  float k = 0.0449f;
  float v = 0.0173f;
};

// x as an FP8 cache holds it: fp8_e4m3_to_float(fp8_e4m3_from_float(x / scale)) * scale.
inline float fp8_kv_value(float x, float scale) { return fp8_e4m3_to_float(fp8_e4m3_from_float(x / scale)) * scale; }

// The E4M3 codes of a case's dequantized cache values (NaN: 0x7F); each must give its value back.
inline std::vector<uint8_t> fp8_kv_codes(const std::vector<double>& values, float scale) {
  std::vector<uint8_t> codes(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = static_cast<float>(values[i]);
    codes[i] = std::isnan(x) ? uint8_t{0x7F} : fp8_e4m3_from_float(x / scale);
    if (!std::isnan(x) && fp8_e4m3_to_float(codes[i]) * scale != x) {
      throw std::logic_error("fp8_kv_codes: " + std::to_string(x) + " is no dequantized code at scale " +
                             std::to_string(scale));
    }
  }
  return codes;
}

// One layer's attention inputs, in float holding values of the kernel's type T (the cache's: FP8 values
// where fp8 is set), and the reference.
struct AttentionCase {
  int head_dim = 0, num_heads = 0, num_kv_heads = 0, block_size = 0;
  std::optional<Fp8KvScales> fp8;        // the cache's scales where it is FP8
  AttentionScoring scoring;              // how the reference scored the keys
  int num_blocks = 0;
  int max_blocks = 0;                    // block table width
  std::vector<AttnSeq> seqs;
  std::vector<int32_t> tables;           // (seqs, max_blocks), -1 past a sequence's blocks
  HostKvCache cache{0, 1, 1, 1, 0.0};
  std::vector<int32_t> positions;        // (rows)
  std::vector<int32_t> query_start;      // (seqs + 1)
  std::vector<int32_t> row_seq;          // (rows)
  std::vector<int32_t> decode_seqs;      // the sequences with one row, in order
  std::vector<float> qkv;                // (rows, (num_heads + 2 num_kv_heads) head_dim); only q is read
  std::vector<double> ref;               // (rows, num_heads head_dim)
  std::vector<float> sinks;              // (num_heads) the sink logits; empty without sinks

  // The sinks as a kernel's argument (a host pointer: the emulated kernels' and the upload's source).
  const float* host_sinks() const { return sinks.empty() ? nullptr : sinks.data(); }

  int num_rows() const { return static_cast<int>(positions.size()); }
  int q_dim() const { return num_heads * head_dim; }
  int qkv_stride() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
};

// Sink logits for num_heads heads: from -2 (a few percent of a short row's weight) to 6 (most of it); the
// scores of the cases' q and k are of order 1.
inline std::vector<float> draw_sinks(int num_heads, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2.0f, 6.0f);
  std::vector<float> sinks(static_cast<size_t>(num_heads));
  for (float& s : sinks) s = dist(rng);
  return sinks;
}

// The case of `seqs` (mixed_batch() unless given); with_sinks: the reference with drawn sink logits
// (scoring.sinks is not read).
template <typename T>
AttentionCase make_attention_case(int head_dim, int num_heads, int num_kv_heads, int block_size,
                                  const std::vector<AttnSeq>& seqs = mixed_batch(),
                                  const AttentionScoring& scoring = {},
                                  const std::optional<Fp8KvScales>& fp8 = std::nullopt, bool with_sinks = false) {
  const int num_seqs = static_cast<int>(seqs.size());
  std::mt19937 rng(static_cast<uint32_t>(head_dim * 131 + num_heads * 7 + block_size));

  AttentionCase c;
  // Block tables: each sequence gets ceil(context / block_size) blocks from a shuffled pool; one spare
  // column of -1 at the end of every table.
  int max_blocks = 0;
  int total_blocks = 0;
  for (const AttnSeq& s : seqs) {
    const int blocks = (s.context + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, blocks + 1);
    total_blocks += blocks;
  }
  const int num_blocks = total_blocks + 3;
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> tables(static_cast<size_t>(num_seqs) * max_blocks, -1);
  size_t next_block = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int blocks = (seqs[s].context + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) tables[static_cast<size_t>(s) * max_blocks + b] = pool[next_block++];
  }

  // Cache: NaN everywhere, random (T-representable) k and v at every position each sequence holds. With
  // a window, the positions before every row's window stay NaN too: a kernel must not even load them
  // (a NaN value row times a zero probability is NaN).
  HostKvCache cache(num_blocks, block_size, num_kv_heads, head_dim, NAN);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random_t = [&](float scale) { return static_cast<double>(to_f32(from_f32<T>(scale * dist(rng)))); };
  auto random_fp8 = [&](float scale) { return static_cast<double>(fp8_kv_value(dist(rng), scale)); };
  for (int s = 0; s < num_seqs; ++s) {
    const int32_t* table = tables.data() + static_cast<size_t>(s) * max_blocks;
    const int first_row = *std::min_element(seqs[s].row_positions.begin(), seqs[s].row_positions.end());
    const int first_seen = window_first_key(first_row, scoring.window);
    for (int p = 0; p < seqs[s].context; ++p) {
      const int slot = table[p / block_size] * block_size + p % block_size;
      for (int h = 0; h < num_kv_heads; ++h) {
        for (int d = 0; d < head_dim; ++d) {
          const double k = fp8 ? random_fp8(fp8->k) : random_t(1.0f);
          const double v = fp8 ? random_fp8(fp8->v) : random_t(1.0f);
          cache.k[cache.offset(slot, h) + d] = p >= first_seen ? k : NAN;
          cache.v[cache.offset(slot, h) + d] = p >= first_seen ? v : NAN;
        }
      }
    }
  }

  // Rows, positions, query_start and q (inside a full qkv row; its k and v parts are not read).
  std::vector<int32_t> positions, query_start = {0}, row_seq;
  for (int s = 0; s < num_seqs; ++s) {
    for (int p : seqs[s].row_positions) {
      positions.push_back(p);
      row_seq.push_back(s);
    }
    query_start.push_back(static_cast<int32_t>(positions.size()));
  }
  const int n = static_cast<int>(positions.size());
  const int q_dim = num_heads * head_dim;
  const int stride = (num_heads + 2 * num_kv_heads) * head_dim;
  const std::vector<float> qkv = round_to<T>(random_vector(static_cast<size_t>(n) * stride, rng(), -3.0f, 3.0f));
  std::vector<float> sinks = with_sinks ? draw_sinks(num_heads, rng) : std::vector<float>();

  std::vector<double> ref(static_cast<size_t>(n) * q_dim);
  const int group = num_heads / num_kv_heads;
  for (int r = 0; r < n; ++r) {
    for (int h = 0; h < num_heads; ++h) {
      const std::vector<double> q(qkv.begin() + static_cast<long>(r) * stride + h * head_dim,
                                  qkv.begin() + static_cast<long>(r) * stride + (h + 1) * head_dim);
      attention_ref(q.data(), positions[r], tables.data() + static_cast<size_t>(row_seq[r]) * max_blocks, cache,
                    h / group, ref.data() + static_cast<size_t>(r) * q_dim + static_cast<size_t>(h) * head_dim,
                    scoring, with_sinks ? static_cast<double>(sinks[static_cast<size_t>(h)]) : -INFINITY);
    }
  }
  for (int s = 0; s < num_seqs; ++s) {
    if (query_start[s + 1] - query_start[s] == 1) c.decode_seqs.push_back(s);
  }
  c.head_dim = head_dim;
  c.num_heads = num_heads;
  c.num_kv_heads = num_kv_heads;
  c.block_size = block_size;
  c.scoring = scoring;
  c.fp8 = fp8;
  c.num_blocks = num_blocks;
  c.max_blocks = max_blocks;
  c.seqs = seqs;
  c.tables = std::move(tables);
  c.cache = std::move(cache);
  c.positions = std::move(positions);
  c.query_start = std::move(query_start);
  c.row_seq = std::move(row_seq);
  c.qkv = qkv;
  c.ref = std::move(ref);
  c.sinks = std::move(sinks);
  c.scoring.sinks = nullptr;  // a case's sinks are host data (host_sinks)
  return c;
}

// The case's K (values_of_k) or V cache as elements of KV: T, or the E4M3 codes of an FP8 case.
template <typename T, typename KV>
std::vector<KV> cache_elements(const AttentionCase& c, bool values_of_k) {
  const std::vector<double>& values = values_of_k ? c.cache.k : c.cache.v;
  if constexpr (kFp8Kv<KV>) {
    if (!c.fp8) throw std::logic_error("cache_elements: FP8 codes of a case drawn without FP8 scales");
    return fp8_kv_codes(values, values_of_k ? c.fp8->k : c.fp8->v);
  } else {
    if (c.fp8) throw std::logic_error("cache_elements: a case drawn for an FP8 cache, read in T");
    std::vector<KV> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) out[i] = from_f32<KV>(static_cast<float>(values[i]));
    return out;
  }
}

// The case's cache (num_blocks, num_kv_heads, block_size, head_dim) inside a wider one of cache_heads heads'
// room a block (a layer narrower than its cache slot: AttentionShape::cache_heads), the heads past the case's
// poisoned (NaN; an FP8 cache's code 0x7F).
template <typename KV>
std::vector<KV> widen_cache(const std::vector<KV>& compact, const AttentionCase& c, int cache_heads) {
  if (cache_heads == 0) return compact;
  const size_t per_head = static_cast<size_t>(c.block_size) * c.head_dim;
  KV poison;
  if constexpr (kFp8Kv<KV>) {
    poison = 0x7F;
  } else {
    poison = from_f32<KV>(NAN);
  }
  std::vector<KV> wide(static_cast<size_t>(c.num_blocks) * cache_heads * per_head, poison);
  for (int b = 0; b < c.num_blocks; ++b) {
    for (int h = 0; h < c.num_kv_heads; ++h) {
      std::copy_n(compact.begin() + static_cast<long>((static_cast<size_t>(b) * c.num_kv_heads + h) * per_head),
                  per_head, wide.begin() + static_cast<long>((static_cast<size_t>(b) * cache_heads + h) * per_head));
    }
  }
  return wide;
}

// The scale of an FP8 case's K or V as a kernel's argument (null for a cache in T).
template <typename KV>
const float* case_kv_scale(const AttentionCase& c, bool of_k) {
  return kFp8Kv<KV> ? (of_k ? &c.fp8->k : &c.fp8->v) : nullptr;
}

struct CaseShape {
  int head_dim, num_heads, num_kv_heads;
};

// f(head_dim, num_heads, num_kv_heads, block_size) for every shape, with full blocks of 16 and blocks of 5
// that cut tiles; a failure names the shape.
template <typename F>
void for_each_case_shape(std::initializer_list<CaseShape> shapes, F&& f) {
  for (const CaseShape& s : shapes) {
    for (int block_size : {16, 5}) {
      CAPTURE(s.head_dim);
      CAPTURE(s.num_heads);
      CAPTURE(s.num_kv_heads);
      CAPTURE(block_size);
      f(s.head_dim, s.num_heads, s.num_kv_heads, block_size);
    }
  }
}

}  // namespace cbatch::test
