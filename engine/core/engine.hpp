// The engine loop: admit requests from a source, and step by step schedule -> pack -> forward -> sample
// -> update, handing finished requests to a sink and one StepRecord per step to an observer. One Engine
// owns one KV cache on one backend and can run several workloads in turn (bench runs every mode).
#pragma once
#include <atomic>
#include <functional>

#include "engine/backend/backend.hpp"
#include "engine/core/engine_config.hpp"
#include "engine/model/kv_groups.hpp"
#include "engine/model/model.hpp"
#include "engine/base/request_stream.hpp"
#include "engine/core/run_stats.hpp"

namespace cbatch {

struct EngineHooks {
  std::function<void(const StepRecord&)> on_step;          // trace and progress
  const std::atomic<int>* stop_signal = nullptr;           // non-zero: stop admitting, end after this step
  DevicePeaks peaks;                                       // valid: sum each step's roofline time
};

class Engine {
 public:
  // Sizes and allocates the KV cache (EngineConfig::kv_cache_blocks, or what the backend allows) and, for a
  // hybrid model, its state slots (min(--max-num-seqs, what the backend's memory allows)).
  Engine(const EngineConfig& config, const Model& model, Backend& backend);

  RunSummary run(RequestSource& source, ResultSink& sink, const EngineHooks& hooks = {});
  int num_kv_blocks() const { return cache_.num_blocks; }
  int num_state_slots() const { return cache_.num_state_slots; }

 private:
  EngineConfig config_;
  const Model& model_;
  Backend& backend_;
  KvGroups groups_;  // which layers keep which K/V (kv_groups.hpp)
  KvCacheSpec cache_;
};

}  // namespace cbatch
