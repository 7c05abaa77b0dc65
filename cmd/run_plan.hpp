// The command line of an engine-running subcommand (run, bench, and the parent of run
// --data-parallel-size), resolved once. resolve_run_plan turns the flags' strings (EngineOptions) into typed
// values, checks each value and each combination (the first problem is one message naming the flag and the
// value, exit 1), and builds the plain structs engine/ and the backends take; nothing after it reads a
// flag's string. What needs the loaded model (the LoRA adapters, gpt-oss's built-in chat format, the
// reranker's answer tokens, --task generate against an encoder) is the second step, resolve_model_plan.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cmd/engine_options.hpp"
#include "cuda/backend/cuda_backend.hpp"
#include "engine/backend/backend.hpp"
#include "engine/base/request.hpp"
#include "engine/core/engine_config.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/io/rerank_template.hpp"
#include "engine/io/shard_spec.hpp"
#include "engine/model/lora_adapter.hpp"
#include "engine/model/model.hpp"
#include "engine/text/chat_format.hpp"

namespace cbatch {

enum class Device : uint8_t { kCpu, kCuda };             // --device, auto resolved: CUDA when built in and a GPU is present
enum class Task : uint8_t { kAuto, kGenerate, kEmbed };  // --task

struct RunPlan {
  Device device = Device::kCpu;
  ModelSource model;                         // --model, --tokenizer, --dummy-dtype, --dummy-layers, --seed
  std::optional<ShardSpec> shard;            // --shard I/N or auto, --num-shards; nullopt: the whole input
  Task task = Task::kAuto;
  EngineConfig engine;                       // --mode, the scheduler's limits, --max-tokens, --seed, --threads, ...
  RequestDefaults requests;                  // --max-tokens, --max-logprobs, --pooling, --task embed
  std::string chat_template;                 // --chat-template; "" = the model's own (resolve_model_plan)
  const RerankTemplate* reranker = nullptr;  // --reranker; null: none
  std::vector<std::string> lora_modules;     // --lora-modules NAME=PATH, loaded by resolve_model_plan
  int max_lora_rank = 64;                    // --max-lora-rank
  CpuBackendOptions cpu;    // device kCpu: --threads, --cpu-precision, --kv-cache-dtype, --max-num-*
  CudaBackendOptions cuda;  // device kCuda: --dtype, --quantization, --kv-cache-dtype, --cuda-kernel, ...
};

// Throws cbatch::Error naming the flag and the value.
RunPlan resolve_run_plan(const EngineOptions& options);

// The part of a run that needs its loaded model.
struct ModelPlan {
  std::shared_ptr<const std::vector<LoraAdapter>> loras;  // --lora-modules, checked against the model; null: none
  EngineConfig engine;                 // the plan's, with the adapters' names (requests pick them by "model")
  ChatFormat chat;                     // --chat-template, else harmony for gpt-oss, else the model's own
  std::optional<RerankFormat> rerank;  // --reranker with its "yes" / "no" tokens in the model's vocabulary
};

// Loads the adapters (their warnings on stderr); throws cbatch::Error naming the flag.
ModelPlan resolve_model_plan(const RunPlan& plan, const Model& model);

// The plan's backend for the model (the CUDA backend sized for the model's context), with the adapters. It
// takes the model's tensors (take_tensors): the model keeps none after, and the heap the loader's buffers
// took is given back once the backend has its own copies.
std::unique_ptr<Backend> make_backend(const RunPlan& plan, const ModelPlan& model_plan, Model& model);

// "[cbatch] loaded PATH (format, dtype, parameters) on DEVICE in S s" on stderr.
void print_load_line(const Model& model, const Backend& backend, std::chrono::steady_clock::time_point start);

}  // namespace cbatch
