// Host versions of the PTX wrappers of cuda/attention/decode_kernels.cuh (cp.async, ldmatrix, mma.m16n8k16,
// movmatrix) and of from_float / pack2, for running the tensor-core decode kernels' block code
// (decode_mma_block.cuh, decode_stream_block.cuh) on the CPU through the block emulator. The fragment
// layouts are those of the PTX ISA for .m8n8 .b16 matrices and mma.m16n8k16 with fp32 accumulators; the
// emulation of the proven tensor-core kernel reproducing the reference is what checks them.
//
// cp.async is emulated as the PTX memory model allows at its latest: a copy reads its source when issued
// but lands in shared memory only when a cp.async.wait_group of its thread retires its group. Recorded in
// Memory::error (the first one; nothing throws across fibers): a read of shared memory (ldmatrix) that
// overlaps a copy still in flight; a copy into shared memory that a lane of the warp has read since the
// warp's last __syncwarp (or another warp since the last __syncthreads), which on a GPU could land before
// that read; a copy or row address that is not 16-byte aligned or leaves the shared memory; a copy from
// outside the global ranges the test registered.
//
// Include after cuda_bf16.h / cuda_fp16.h and tests/cuda/block_emulator.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cbatch {

template <typename T>
inline T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    static_assert(std::is_same_v<T, __half>, "bf16 or fp16");
    return __float2half_rn(v);
  }
}

namespace warp_mma {

// What the emulated instructions check against, for one launch: the block's dynamic shared memory and the
// global arrays a copy may read.
struct Memory {
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;
  std::vector<std::pair<const void*, size_t>> global;  // (begin, bytes)
  std::vector<int> in_flight;                           // copies in flight per 16-byte piece of smem
  struct Read {
    int warp = -1;                // the warp that last read the piece (-1: none)
    uint64_t warp_syncs = 0;      // its barrier counts then (Block::warp_syncs, block_syncs)
    uint64_t block_syncs = 0;
  };
  std::vector<Read> last_read;                          // per 16-byte piece of smem
  std::string error;                                    // the first misuse seen

  void fail(const std::string& what) {
    if (error.empty()) error = what;
  }
  // The index of the 16-byte piece at p, or -1 (recorded) when p is outside smem or misaligned.
  long piece(const void* p, const char* what) {
    const auto* c = static_cast<const unsigned char*>(p);
    if (c < smem || c + 16 > smem + smem_bytes) {
      fail(std::string(what) + ": address outside shared memory");
      return -1;
    }
    if ((c - smem) % 16 != 0) {
      fail(std::string(what) + ": address not 16-byte aligned");
      return -1;
    }
    return (c - smem) / 16;
  }
  bool global_ok(const void* p, size_t bytes) const {
    const auto* c = static_cast<const unsigned char*>(p);
    for (const auto& [begin, size] : global) {
      const auto* b = static_cast<const unsigned char*>(begin);
      if (c >= b && c + bytes <= b + size) return true;
    }
    return false;
  }
};

inline Memory& memory() {
  static Memory m;
  return m;
}

struct Copy {
  unsigned char* dst;
  unsigned char bytes[16];
  long piece;
};

// Each thread's cp.async state: the open group and the committed ones, oldest first.
struct ThreadCopies {
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> committed;
};

inline std::vector<ThreadCopies>& thread_copies() {
  static std::vector<ThreadCopies> copies;
  return copies;
}
inline ThreadCopies& my_copies() {
  std::vector<ThreadCopies>& all = thread_copies();
  const size_t t = threadIdx.x;
  if (all.size() <= t) all.resize(t + 1);
  return all[t];
}

// Fresh state for a launch: smem_bytes of shared memory filled with 0xFF (NaN in bf16 and fp16).
inline void begin_launch(unsigned char* smem, size_t smem_bytes, std::vector<std::pair<const void*, size_t>> global) {
  Memory& m = memory();
  m.smem = smem;
  m.smem_bytes = smem_bytes;
  m.global = std::move(global);
  m.in_flight.assign(smem_bytes / 16, 0);
  m.last_read.assign(smem_bytes / 16, Memory::Read{});
  m.error.clear();
  thread_copies().clear();
}
// Before each block: its shared memory as undefined as a GPU leaves it, and no copy left from the last one.
inline void begin_block() {
  Memory& m = memory();
  std::memset(m.smem, 0xFF, m.smem_bytes);
  std::fill(m.last_read.begin(), m.last_read.end(), Memory::Read{});
  for (ThreadCopies& c : thread_copies()) {
    if (!c.open.empty() || !c.committed.empty()) m.fail("a thread ended its block with cp.async copies in flight");
    c = ThreadCopies();
  }
}
// After the launch: a copy still in flight would land after its block ended.
inline void end_launch() { begin_block(); }

inline uint16_t bits16(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

template <typename T>
inline float element_to_float(uint16_t bits) {
  T v;
  std::memcpy(static_cast<void*>(&v), &bits, 2);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return __half2float(v);
  }
}

}  // namespace warp_mma

namespace decode_detail {

inline void cp_async16_zfill(void* smem, const void* gmem, int src_bytes) {
  warp_mma::Memory& m = warp_mma::memory();
  warp_mma::Copy c{};
  c.dst = static_cast<unsigned char*>(smem);
  c.piece = m.piece(smem, "cp.async destination");
  if (src_bytes != 0 && src_bytes != 16) m.fail("cp.async: src_bytes other than 0 or 16");
  if (src_bytes == 16) {
    if (reinterpret_cast<uintptr_t>(gmem) % 16 != 0) m.fail("cp.async source: address not 16-byte aligned");
    if (!m.global_ok(gmem, 16)) {
      m.fail("cp.async source: outside the registered global arrays");
    } else {
      std::memcpy(c.bytes, gmem, 16);
    }
  }
  if (c.piece >= 0) {
    const block_emulator::Block* b = block_emulator::Block::active();
    const warp_mma::Memory::Read& r = m.last_read[static_cast<size_t>(c.piece)];
    const bool unordered = r.warp == b->warp_index() ? r.warp_syncs == b->warp_syncs()
                                                     : r.warp >= 0 && r.block_syncs == b->block_syncs();
    if (unordered) m.fail("cp.async overwrites shared memory read with no barrier in between");
    ++m.in_flight[static_cast<size_t>(c.piece)];
  }
  warp_mma::my_copies().open.push_back(c);
}

inline void cp_async_commit() {
  warp_mma::ThreadCopies& t = warp_mma::my_copies();
  t.committed.push_back(std::move(t.open));
  t.open.clear();
}

template <int N>
inline void cp_async_wait() {
  warp_mma::Memory& m = warp_mma::memory();
  warp_mma::ThreadCopies& t = warp_mma::my_copies();
  while (t.committed.size() > static_cast<size_t>(N)) {
    for (const warp_mma::Copy& c : t.committed.front()) {
      if (c.piece < 0) continue;
      std::memcpy(c.dst, c.bytes, 16);
      --m.in_flight[static_cast<size_t>(c.piece)];
    }
    t.committed.erase(t.committed.begin());
  }
}

// ldmatrix .x4: lanes 8 i .. 8 i + 7 give the row addresses of matrix i; lane l receives, of matrix i,
// row l / 4, columns 2 (l % 4) and + 1 (transposed: rows 2 (l % 4) and + 1 of column l / 4).
template <bool kTrans>
inline void ldmatrix_x4_emulated(uint32_t (&r)[4], const void* row_address) {
  block_emulator::Block* b = block_emulator::Block::active();
  const uint64_t* rows = b->exchange(block_emulator::to_bits(row_address));
  warp_mma::Memory& m = warp_mma::memory();
  const int lane = b->lane();
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int j = 0; j < 2; ++j) {
      const int row = kTrans ? 2 * (lane % 4) + j : lane / 4;
      const int col = kTrans ? lane / 4 : 2 * (lane % 4) + j;
      const auto* p = reinterpret_cast<const unsigned char*>(rows[8 * i + row]);
      const long piece = m.piece(p, "ldmatrix row");
      if (piece < 0) {
        e[j] = 0;
        continue;
      }
      if (m.in_flight[static_cast<size_t>(piece)] != 0) m.fail("ldmatrix reads shared memory a cp.async still writes");
      m.last_read[static_cast<size_t>(piece)] =
          warp_mma::Memory::Read{b->warp_index(), b->warp_syncs(), b->block_syncs()};
      e[j] = warp_mma::bits16(p + 2 * col);
    }
    r[i] = static_cast<uint32_t>(e[0]) | static_cast<uint32_t>(e[1]) << 16;
  }
}
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) { ldmatrix_x4_emulated<false>(r, row_address); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  ldmatrix_x4_emulated<true>(r, row_address);
}

// c += A B (16 x 16 by 16 x 8, fp32 accumulate). Lane l = 4 g + t holds A[g][2t, 2t+1] (a0), A[g+8][..]
// (a1), A[g][2t+8, 2t+9] (a2), A[g+8][..] (a3); B[2t, 2t+1][g] (b0), B[2t+8, 2t+9][g] (b1); and
// C[g][2t, 2t+1] (c0, c1), C[g+8][..] (c2, c3).
template <typename T>
inline void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  block_emulator::Block* blk = block_emulator::Block::active();
  const uint64_t words[3] = {a0 | static_cast<uint64_t>(a1) << 32, a2 | static_cast<uint64_t>(a3) << 32,
                             b0 | static_cast<uint64_t>(b1) << 32};
  const auto* all = blk->exchange_words(words, 3);
  // A[r][k] is half (r >= 8 ? 2 : 0) + k % 2 of word k / 8 of lane 4 (r % 8) + (k % 8) / 2; B[k][n] is half
  // (k >= 8 ? 2 : 0) + k % 2 of word 2 of lane 4 n + (k % 8) / 2.
  auto element = [&](int lane, int word, int half) {
    return warp_mma::element_to_float<T>(static_cast<uint16_t>(all[lane][word] >> (16 * half)));
  };
  const int lane = blk->lane(), g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i / 2) * 8, col = 2 * t + i % 2;
    float sum = c[i];
    for (int k = 0; k < 16; ++k) {
      const float a = element(4 * (row % 8) + (k % 8) / 2, k / 8, (row >= 8 ? 2 : 0) + k % 2);
      const float b = element(4 * col + (k % 8) / 2, 2, (k >= 8 ? 2 : 0) + k % 2);
      sum += a * b;
    }
    c[i] = sum;
  }
}
template <typename T>
inline void mma_16816(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  mma_16816<T>(c, a0, 0u, a2, 0u, b0, b1);
}

template <typename T>
inline uint32_t pack2(float lo, float hi) {
  const T l = from_float<T>(lo), h = from_float<T>(hi);
  uint16_t lb, hb;
  std::memcpy(&lb, &l, 2);
  std::memcpy(&hb, &h, 2);
  return static_cast<uint32_t>(lb) | static_cast<uint32_t>(hb) << 16;
}

// movmatrix .m8n8 .trans: lane l holds row l / 4, columns 2 (l % 4) and + 1 of an 8 x 8 matrix, before
// and after; after, of its transpose.
inline uint32_t movmatrix_trans(uint32_t x) {
  block_emulator::Block* b = block_emulator::Block::active();
  const uint64_t* all = b->exchange(x);
  const int lane = b->lane();
  uint32_t y = 0;
  for (int j = 0; j < 2; ++j) {
    const int src_row = 2 * (lane % 4) + j, src_col = lane / 4;  // M[src_row][src_col]
    const auto word = static_cast<uint32_t>(all[4 * src_row + src_col / 2]);
    const uint32_t e = (word >> (16 * (src_col % 2))) & 0xFFFFu;
    y |= e << (16 * j);
  }
  return y;
}

}  // namespace decode_detail
}  // namespace cbatch
