// The options every engine-running subcommand (run, bench) shares: model, device and scheduler flags, as
// CLI11 parses them (strings and numbers; CLI11 checks their ranges and names). resolve_run_plan
// (run_plan.hpp) validates them once and builds everything the engine and the backends receive.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace cbatch {

struct EngineOptions {
  std::string model;
  std::string tokenizer;
  std::string chat_template;  // --chat-template NAME; "" = the model's own
  std::string reasoning_parser;  // --reasoning-parser NAME; "" = outputs unsplit
  std::string reranker;          // --reranker NAME (engine/io/rerank_template.hpp); "" = no score/rerank lines
  std::string device = "auto";
  std::string mode = "continuous";
  std::string dtype = "auto";
  std::string quantization;              // --quantization: "" (the model's weights as they are) or fp8
  std::string kv_cache_dtype = "auto";   // --kv-cache-dtype: auto, bfloat16, float32 (CPU) or fp8 (CUDA)
  std::string cpu_precision;             // --cpu-precision: fast or exact; "" = fast (CPU backend only)
  int max_num_batched_tokens = 2048;
  int max_num_seqs = 256;
  int block_size = 16;
  int kv_cache_blocks = 0;
  int state_snapshots = -1;              // --state-snapshots: -1 = a quarter of the recurrent-state memory
  std::string kv_cache_memory;           // --kv-cache-memory: bytes, or with a K/M/G suffix (powers of 1024)
  double gpu_memory_utilization = 0.9;
  int max_tokens = 16;
  int max_logprobs = 20;           // the largest k of logprobs / prompt_logprobs a request may ask
  std::string pooling;             // --pooling mean | cls | last: embedding lines' pooling ("" = the model's)
  std::string task = "auto";       // --task auto | generate | embed
  uint64_t seed = 0;
  std::string dummy_dtype = "f32";  // --dummy-dtype: f32, q8_0 (dummy: linear weights, CPU) or mxfp4 (experts)
  int dummy_layers = 0;            // --dummy-layers: the first N layers of a dummy: config; 0 = all
  int threads = 0;
  bool quiet = false;
  bool enable_prefix_caching = true;
  std::string shard;   // --shard I/N or auto; "" = the whole input
  int num_shards = 0;  // --num-shards (with --shard auto on Kubernetes)
  std::vector<std::string> lora_modules;  // --lora-modules NAME=PATH, repeatable
  int max_loras = 4;                      // LoRA adapters one step may use
  int max_lora_rank = 64;                 // the largest adapter rank accepted
  std::vector<std::string> cuda_kernels;  // --cuda-kernel NAME=VALUE, repeatable (cuda_kernel_flags.hpp)
  bool cuda_profile = false;              // --cuda-profile
};

void add_engine_options(CLI::App& app, EngineOptions& options);
// --chat-template NAME (also used by `tokenize`).
void add_chat_template_option(CLI::App& app, std::string& name);

}  // namespace cbatch
