// The validated configuration of one run, built once by cmd/ and passed down as const&. Values derived
// from it (the KV block count, the cache layout) live in their own structs, never written back here.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

enum class Mode : uint8_t { kContinuous, kStatic, kSequential };

std::string_view mode_name(Mode mode);
// Parses "continuous" | "static" | "sequential"; throws cbatch::Error naming the value otherwise.
Mode parse_mode(std::string_view name);

struct SchedulerConfig {
  Mode mode = Mode::kContinuous;
  int max_num_batched_tokens = 2048;  // token budget of one step (prefill chunks + decodes + padding)
  int max_num_seqs = 256;             // sequences in one step
  int block_size = 16;                // tokens per KV block
  bool enable_prefix_caching = true;  // reuse the K/V of cached full blocks (block_manager.hpp)
  int max_loras = 4;                  // LoRA adapters the sequences of one step may use
};

struct EngineConfig {
  SchedulerConfig scheduler;
  int kv_cache_blocks = 0;            // 0 = as many as the backend's memory allows
  int64_t kv_cache_memory_bytes = 0;  // --kv-cache-memory: the blocks' bytes (0: the default pool)
  int state_snapshots = -1;           // --state-snapshots: a hybrid model's prefix-cache state snapshots; -1 = auto
  int default_max_tokens = 16;        // max_tokens of requests that do not set it
  uint64_t seed = 0;                  // base of per-request seeds
  bool ordered = false;               // write results in input order
  bool quiet = false;                 // no progress line
  int lookahead = 0;                  // requests read ahead of admission; 0 = 4 * max_num_seqs + 64
  int sampling_threads = 0;           // threads that sample a step's rows; 0 = all hardware threads
  std::string reasoning_parser;       // --reasoning-parser: deepseek_r1, qwen3, gemma4, gpt_oss; "" = none
  // LoRA adapters by id - 1; with any, a request's `model` picks one (the base model's name or none: no adapter).
  std::vector<std::string> lora_names;
};

}  // namespace cbatch
