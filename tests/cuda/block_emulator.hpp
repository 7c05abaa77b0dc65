// Runs block code written for CUDA on the CPU, to check a kernel's logic where there is no GPU: each CUDA
// thread of a block is a fiber on the calling thread, switched cooperatively. __syncthreads is a block
// barrier; the warp intrinsics (__shfl*_sync, __ballot_sync, __match_any_sync, __syncwarp) trade values
// through per-warp slots between two warp barriers, so every lane must call them converged, with the full
// mask, as warp-synchronous code does. A barrier no fiber can pass throws. Include this after every CUDA
// header and before the block code (a .cuh that includes no CUDA header); it defines the CUDA keywords that
// code uses as macros. Grids may be 3-D (blockIdx, gridDim); blockDim is the block's size in x.
// Fibers switch through switch_stack (block_emulator.cpp: a few instructions on x86-64, where the tests run
// thousands of warp exchanges per kernel) or, elsewhere, through ucontext.
#pragma once
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#undef __device__
#undef __host__
#undef __global__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static  // one instance: blocks run one after the other
#define __launch_bounds__(...)
#define threadIdx (::block_emulator::current_thread())
#define blockIdx (::block_emulator::current_block())
#define gridDim (::block_emulator::grid_dim())
#define blockDim (::block_emulator::block_dim())

#if defined(__x86_64__) && !defined(CBATCH_EMULATOR_UCONTEXT)  // (defined: the portable path, to test it)
#define CBATCH_EMULATOR_STACK_SWITCH 1
// Saves the callee-saved registers on the current stack, stores its pointer in *save_sp, continues on the
// stack at load_sp (one saved this way, or prepared by Block::start_fiber).
extern "C" void cbatch_emulator_switch_stack(void** save_sp, void* load_sp);
#endif

namespace block_emulator {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

class Block {
 public:
  static constexpr int kMaxExchangeWords = 4;

  explicit Block(int num_threads)
      : num_threads_(num_threads),
        fibers_(static_cast<size_t>(num_threads)),
        warps_(static_cast<size_t>((num_threads + 31) / 32)) {
    for (size_t w = 0; w < warps_.size(); ++w) {
      warps_[w].barrier.expected = std::min(32, num_threads - 32 * static_cast<int>(w));
    }
    block_barrier_.expected = num_threads;
    for (Fiber& f : fibers_) f.stack.resize(kStackBytes);
    warp_syncs_.assign(static_cast<size_t>(num_threads), 0);
    block_syncs_.assign(static_cast<size_t>(num_threads), 0);
  }

  // Runs body() once per thread of block `block_index` of a grid of `grid` blocks, to the end of every
  // thread.
  void run(Index block_index, Index grid, const std::function<void()>& body) {
    block_ = block_index;
    grid_ = grid;
    body_ = &body;
    std::fill(warp_syncs_.begin(), warp_syncs_.end(), 0);
    std::fill(block_syncs_.begin(), block_syncs_.end(), 0);
    for (int t = 0; t < num_threads_; ++t) start_fiber(fibers_[static_cast<size_t>(t)]);
    int remaining = num_threads_;
    while (remaining > 0) {
      progress_ = false;
      for (int t = 0; t < num_threads_; ++t) {
        Fiber& f = fibers_[static_cast<size_t>(t)];
        if (f.done) continue;
        current_ = t;
        active() = this;
        resume(f);
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
  Index& grid() { return grid_; }
  unsigned block_dim() const { return static_cast<unsigned>(num_threads_); }
  int lane() const { return current_ % 32; }

  void sync_block() {
    wait(block_barrier_);
    ++block_syncs_[static_cast<size_t>(current_)];  // per thread: one running ahead leaves the others' counts
  }
  void sync_warp() {
    wait(warp().barrier);
    ++warp_syncs_[static_cast<size_t>(current_)];
  }
  int warp_index() const { return current_ / 32; }
  // The barriers (__syncwarp, __syncthreads) the calling thread has passed in this block: shared memory
  // read before the current count is ordered before the thread's writes (and another warp's, by the
  // __syncthreads count). The warp exchanges order no memory, as on a GPU.
  uint64_t warp_syncs() const { return warp_syncs_[static_cast<size_t>(current_)] + block_syncs(); }
  uint64_t block_syncs() const { return block_syncs_[static_cast<size_t>(current_)]; }

  // Every lane of the warp publishes `value`; returns the values of all 32 lanes, valid until the calling
  // thread's next exchange.
  const uint64_t* exchange(uint64_t value) {
    const uint64_t(*all)[kMaxExchangeWords] = exchange_words(&value, 1);
    uint64_t* view = fibers_[static_cast<size_t>(current_)].view;
    for (int l = 0; l < 32; ++l) view[l] = all[l][0];
    return view;
  }

  // The same for n <= kMaxExchangeWords words a lane, through one warp barrier: row l of the result holds
  // lane l's words. The warp alternates between two slot sets, so a lane may read a result until its
  // next exchange: the set is rewritten two exchanges on, after every lane has arrived at the one between.
  const uint64_t (*exchange_words(const uint64_t* words, int n))[kMaxExchangeWords] {
    Warp& w = warp();
    Fiber& f = fibers_[static_cast<size_t>(current_)];
    auto& slots = w.slot[f.exchanges++ % 2];
    std::copy(words, words + n, slots[lane()]);
    wait(w.barrier);
    return slots;
  }

 private:
  static constexpr size_t kStackBytes = 64 * 1024;
  struct Barrier {
    int expected = 0, arrived = 0;
    uint64_t generation = 0;
  };
  struct Fiber {
#ifdef CBATCH_EMULATOR_STACK_SWITCH
    void* sp = nullptr;
#else
    ucontext_t context{};
#endif
    std::vector<char> stack;
    Index index;
    bool done = false;
    uint64_t exchanges = 0;  // this thread's exchanges so far in the block: picks the slot set
    uint64_t view[32] = {};
  };
  struct Warp {
    Barrier barrier;
    uint64_t slot[2][32][kMaxExchangeWords] = {};
  };

#ifdef CBATCH_EMULATOR_STACK_SWITCH
  // A fresh stack whose first switch "returns" into entry(): six zero callee-saved registers under entry's
  // address, placed so that entry starts with the stack aligned as after a call.
  void start_fiber(Fiber& f) {
    f.done = false;
    f.exchanges = 0;
    auto top = reinterpret_cast<uintptr_t>(f.stack.data() + f.stack.size()) & ~uintptr_t{15};
    void** sp = reinterpret_cast<void**>(top - 16);
    *sp = reinterpret_cast<void*>(&Block::entry);
    for (int i = 0; i < 6; ++i) *--sp = nullptr;
    f.sp = sp;
  }
  void resume(Fiber& f) { cbatch_emulator_switch_stack(&scheduler_sp_, f.sp); }
  void yield(Fiber& f) { cbatch_emulator_switch_stack(&f.sp, scheduler_sp_); }
#else
  void start_fiber(Fiber& f) {
    f.done = false;
    f.exchanges = 0;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.data();
    f.context.uc_stack.ss_size = f.stack.size();
    f.context.uc_link = &scheduler_;
    makecontext(&f.context, &Block::entry, 0);
  }
  void resume(Fiber& f) { swapcontext(&scheduler_, &f.context); }
  void yield(Fiber& f) { swapcontext(&f.context, &scheduler_); }
#endif

  [[noreturn]] static void entry() {
    Block* b = active();
    b->thread_index().x = static_cast<unsigned>(b->current_);
    (*b->body_)();
    Fiber& f = b->fibers_[static_cast<size_t>(b->current_)];
    f.done = true;
    b->yield(f);  // never resumed
    std::abort();
  }

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
      yield(fibers_[static_cast<size_t>(self)]);
      current_ = self;
    }
  }

  int num_threads_;
  std::vector<Fiber> fibers_;
  std::vector<Warp> warps_;
  Barrier block_barrier_;
  std::vector<uint64_t> warp_syncs_;   // per thread: __syncwarp calls passed
  std::vector<uint64_t> block_syncs_;  // per thread: __syncthreads calls passed
#ifdef CBATCH_EMULATOR_STACK_SWITCH
  void* scheduler_sp_ = nullptr;
#else
  ucontext_t scheduler_{};
#endif
  Index block_;
  Index grid_;
  const std::function<void()>* body_ = nullptr;
  int current_ = 0;
  bool progress_ = false;
};

inline Index& current_thread() { return Block::active()->thread_index(); }
inline Index& current_block() { return Block::active()->block_index(); }
inline Index& grid_dim() { return Block::active()->grid(); }
inline Index block_dim() { return Index{Block::active()->block_dim(), 1, 1}; }

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

// Runs block code for a grid of blocks of block_size threads, one block after the other (x fastest);
// before_block, when given, runs before each block's threads start (e.g. to fill its shared memory).
inline void launch(Index grid, int block_size, const std::function<void()>& body,
                   const std::function<void(Index)>& before_block = {}) {
  Block block(block_size);
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        if (before_block) before_block(Index{x, y, z});
        block.run(Index{x, y, z}, grid, body);
      }
    }
  }
}
inline void launch(unsigned grid_size, int block_size, const std::function<void()>& body) {
  launch(Index{grid_size, 1, 1}, block_size, body);
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
