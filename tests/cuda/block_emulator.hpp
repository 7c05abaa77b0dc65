// Runs block code written for CUDA on the CPU, to check a kernel's logic where there is no GPU: each CUDA
// thread of a block is a fiber (ucontext) on the calling thread, switched cooperatively. __syncthreads is
// a block barrier; the warp intrinsics (__shfl*_sync, __ballot_sync, __match_any_sync, __syncwarp) trade
// values through per-warp slots between two warp barriers, so every lane must call them converged, with
// the full mask, as warp-synchronous code does. A barrier no fiber can pass throws. Include this before the
// block code (a .cuh that includes no CUDA header); it defines the CUDA keywords that code uses as macros.
#pragma once
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static  // one instance: blocks run one after the other
#define __launch_bounds__(...)
#define threadIdx (::block_emulator::current_thread())
#define blockIdx (::block_emulator::current_block())

namespace block_emulator {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

class Block {
 public:
  explicit Block(int num_threads)
      : num_threads_(num_threads),
        fibers_(static_cast<size_t>(num_threads)),
        warps_(static_cast<size_t>((num_threads + 31) / 32)) {
    for (size_t w = 0; w < warps_.size(); ++w) {
      warps_[w].barrier.expected = std::min(32, num_threads - 32 * static_cast<int>(w));
    }
    block_barrier_.expected = num_threads;
  }

  // Runs body() once per thread of block `block_index`, to the end of every thread.
  void run(unsigned block_index, const std::function<void()>& body) {
    block_.x = block_index;
    body_ = &body;
    for (int t = 0; t < num_threads_; ++t) {
      Fiber& f = fibers_[static_cast<size_t>(t)];
      f.stack.resize(kStackBytes);
      f.done = false;
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = f.stack.data();
      f.context.uc_stack.ss_size = f.stack.size();
      f.context.uc_link = &scheduler_;
      makecontext(&f.context, &Block::entry, 0);
    }
    int remaining = num_threads_;
    while (remaining > 0) {
      progress_ = false;
      for (int t = 0; t < num_threads_; ++t) {
        Fiber& f = fibers_[static_cast<size_t>(t)];
        if (f.done) continue;
        current_ = t;
        active() = this;
        swapcontext(&scheduler_, &f.context);
        if (f.done) --remaining, progress_ = true;
      }
      if (!progress_ && remaining > 0) throw std::runtime_error("block emulator: every thread waits at a barrier");
    }
    active() = nullptr;
  }

  static Block*& active() {
    static Block* block = nullptr;
    return block;
  }

  Index& thread_index() { return fibers_[static_cast<size_t>(current_)].index; }
  Index& block_index() { return block_; }
  int lane() const { return current_ % 32; }

  void sync_block() { wait(block_barrier_); }
  void sync_warp() { wait(warp().barrier); }

  // Every lane of the warp publishes `value`; returns the values of all 32 lanes (the calling thread's
  // copy, valid until its next call).
  const uint64_t* exchange(uint64_t value) {
    Warp& w = warp();
    w.slot[lane()] = value;
    wait(w.barrier);
    uint64_t* view = fibers_[static_cast<size_t>(current_)].view;
    std::memcpy(view, w.slot, sizeof w.slot);
    wait(w.barrier);  // no lane rewrites a slot before every lane has read them
    return view;
  }

 private:
  static constexpr size_t kStackBytes = 64 * 1024;
  struct Barrier {
    int expected = 0, arrived = 0;
    uint64_t generation = 0;
  };
  struct Fiber {
    ucontext_t context{};
    std::vector<char> stack;
    Index index;
    bool done = false;
    uint64_t view[32] = {};
  };
  struct Warp {
    Barrier barrier;
    uint64_t slot[32] = {};
  };

  static void entry() {
    Block* b = active();
    b->thread_index().x = static_cast<unsigned>(b->current_);
    (*b->body_)();
    b->fibers_[static_cast<size_t>(b->current_)].done = true;
  }  // returns to the scheduler through uc_link

  Warp& warp() { return warps_[static_cast<size_t>(current_ / 32)]; }

  void wait(Barrier& b) {
    const uint64_t generation = b.generation;
    if (++b.arrived == b.expected) {
      b.arrived = 0;
      ++b.generation;
      progress_ = true;
      return;
    }
    while (b.generation == generation) {
      const int self = current_;
      swapcontext(&fibers_[static_cast<size_t>(self)].context, &scheduler_);
      current_ = self;
    }
  }

  int num_threads_;
  std::vector<Fiber> fibers_;
  std::vector<Warp> warps_;
  Barrier block_barrier_;
  ucontext_t scheduler_{};
  Index block_;
  const std::function<void()>* body_ = nullptr;
  int current_ = 0;
  bool progress_ = false;
};

inline Index& current_thread() { return Block::active()->thread_index(); }
inline Index& current_block() { return Block::active()->block_index(); }

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  return bits;
}
template <typename T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Runs block code for grid_size blocks of block_size threads, one block after the other.
inline void launch(unsigned grid_size, int block_size, const std::function<void()>& body) {
  Block block(block_size);
  for (unsigned b = 0; b < grid_size; ++b) block.run(b, body);
}

}  // namespace block_emulator

using std::max;
using std::min;

inline void __syncthreads() { block_emulator::Block::active()->sync_block(); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { block_emulator::Block::active()->sync_warp(); }
inline int __ffs(unsigned x) { return x == 0 ? 0 : std::countr_zero(x) + 1; }
inline int __popc(unsigned x) { return std::popcount(x); }

template <typename T>
T __shfl_sync(unsigned, T value, int src_lane) {
  const uint64_t* all = block_emulator::Block::active()->exchange(block_emulator::to_bits(value));
  return block_emulator::from_bits<T>(all[src_lane & 31]);
}
template <typename T>
T __shfl_xor_sync(unsigned, T value, int lane_mask) {
  const int lane = block_emulator::Block::active()->lane();
  return __shfl_sync(0xFFFFFFFFu, value, lane ^ lane_mask);
}
template <typename T>
T __shfl_up_sync(unsigned, T value, unsigned delta) {  // lanes below delta keep their own value
  const int lane = block_emulator::Block::active()->lane();
  return __shfl_sync(0xFFFFFFFFu, value, lane >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : lane);
}
inline unsigned __ballot_sync(unsigned, bool predicate) {
  const uint64_t* all = block_emulator::Block::active()->exchange(predicate ? 1 : 0);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) bits |= static_cast<unsigned>(all[l] != 0) << l;
  return bits;
}
template <typename T>
unsigned __match_any_sync(unsigned, T value) {
  const uint64_t mine = block_emulator::to_bits(value);
  const uint64_t* all = block_emulator::Block::active()->exchange(mine);
  unsigned peers = 0;
  for (int l = 0; l < 32; ++l) peers |= static_cast<unsigned>(all[l] == mine) << l;
  return peers;
}
