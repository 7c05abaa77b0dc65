#include "cmd/run_plan.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cmd/cuda_kernel_flags.hpp"
#include "engine/base/elide.hpp"
#include "engine/base/embedding_params.hpp"
#include "engine/base/error.hpp"
#include "engine/base/free_heap.hpp"
#include "engine/core/state_snapshots.hpp"
#include "engine/text/reasoning_parser.hpp"

namespace cbatch {
namespace {

// "1073741824", "512M", "2G" (powers of 1024; K, M, G, either case, an optional trailing B); "" is 0 (unset).
int64_t parse_memory_size(const std::string& flag, const std::string& text) {
  if (text.empty()) return 0;
  std::string digits = text;
  if (!digits.empty() && (digits.back() == 'B' || digits.back() == 'b')) digits.pop_back();
  int64_t unit = 1;
  if (!digits.empty()) {
    const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
    const int shift = suffix == 'K' ? 10 : suffix == 'M' ? 20 : suffix == 'G' ? 30 : 0;
    if (shift > 0) unit = int64_t{1} << shift, digits.pop_back();
  }
  const bool all_digits = !digits.empty() && digits.size() <= 15 &&
                          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int64_t bytes = all_digits ? std::stoll(digits) * unit : 0;
  if (bytes <= 0 || bytes / unit > (int64_t{1} << 50) / unit) {
    throw Error(flag + " " + elide(text) + ": expected a positive size in bytes, or with a K, M or G suffix (512M, 2G)");
  }
  return bytes;
}

std::optional<ShardSpec> shard_of(const EngineOptions& o) {
  if (o.shard.empty()) {
    if (o.num_shards > 0) throw Error("--num-shards goes with --shard auto");
    return std::nullopt;
  }
  return resolve_shard(o.shard, o.num_shards, process_environment());
}

ModelSource model_source(const EngineOptions& o) {
  if (o.model.empty()) throw Error("no model: pass --model PATH (or set CBATCH_MODEL); `make run` fetches the default one");
  const bool is_dummy = o.model.rfind("dummy:", 0) == 0;
  if (!is_dummy && (o.dummy_dtype != "f32" || o.dummy_layers != 0)) {
    throw Error("--dummy-dtype and --dummy-layers apply to dummy: models only, not '" + o.model + "'");
  }
  ModelSource source;
  source.path = o.model;
  source.tokenizer_path = o.tokenizer;
  source.dummy_seed = o.seed;
  source.dummy_dtype = o.dummy_dtype == "q8_0" ? DType::kQ8_0 : o.dummy_dtype == "mxfp4" ? DType::kMXFP4 : DType::kF32;
  source.dummy_layers = o.dummy_layers;
  return source;
}

// --device auto: CUDA when compiled in and a GPU is present.
Device resolve_device(const EngineOptions& o) {
  if (o.device == "cuda" && !o.cpu_precision.empty()) {
    throw Error("--cpu-precision " + o.cpu_precision + ": applies to the CPU backend only, not --device cuda");
  }
#ifdef CBATCH_HAVE_CUDA
  if (o.device == "cuda") {
    if (cuda_device_count() == 0) throw Error("--device cuda: no CUDA device is available");
    return Device::kCuda;
  }
  return o.device == "auto" && cuda_device_count() > 0 ? Device::kCuda : Device::kCpu;
#else
  if (o.device == "cuda") throw Error("--device cuda: this cbatch was built without CUDA support");
  return Device::kCpu;
#endif
}

CudaBackendOptions cuda_options(const EngineOptions& o, const CudaKernelOptions& kernels) {
  if (!o.cpu_precision.empty()) {
    throw Error("--cpu-precision " + o.cpu_precision + ": applies to the CPU backend only, and this run uses a "
                "CUDA GPU (add --device cpu)");
  }
  if (o.kv_cache_dtype == "bfloat16" || o.kv_cache_dtype == "float32") {
    throw Error("--kv-cache-dtype " + o.kv_cache_dtype + ": applies to the CPU backend (add --device cpu); on CUDA "
                "the KV cache holds the compute dtype (--dtype) or fp8");
  }
  CudaBackendOptions cuda;
  cuda.dtype = o.dtype == "fp32" ? ComputeDType::kF32 : o.dtype == "fp16" ? ComputeDType::kF16 : ComputeDType::kBF16;
  cuda.max_batch_tokens = std::max(o.max_num_batched_tokens, o.max_num_seqs);
  cuda.max_num_seqs = o.max_num_seqs;
  cuda.gpu_memory_utilization = static_cast<float>(o.gpu_memory_utilization);
  cuda.fp8_weights = o.quantization == "fp8";
  cuda.fp8_kv_cache = o.kv_cache_dtype != "auto";
  // A hybrid model's prefix cache keeps recurrent-state snapshots in slots beyond the running ones: those
  // --state-snapshots asks, else a quarter of the state memory, as the engine splits it on the CPU.
  if (o.enable_prefix_caching) {
    cuda.state_snapshots = o.state_snapshots >= 0 ? o.state_snapshots : snapshots_beside(o.max_num_seqs);
  }
  cuda.kernels = kernels;
  return cuda;
}

// --cuda-kernel and --cuda-profile name CUDA kernels: on the CPU they are an error, not ignored.
void refuse_cuda_flags(const EngineOptions& o) {
  const std::string flag = first_cuda_kernel_flag(o.cuda_kernels, o.cuda_profile);
  if (flag.empty()) return;
  if (o.device == "cpu") throw Error(flag + ": applies to the CUDA backend only, not --device cpu");
#ifdef CBATCH_HAVE_CUDA
  throw Error(flag + ": applies to the CUDA backend only, and this run uses the CPU (no CUDA device is available)");
#else
  throw Error(flag + ": this cbatch was built without CUDA support");
#endif
}

CpuBackendOptions cpu_options(const EngineOptions& o) {
  if (!o.quantization.empty() || o.kv_cache_dtype.starts_with("fp8")) {
    throw Error(std::string(o.quantization.empty() ? "--kv-cache-dtype " + o.kv_cache_dtype : "--quantization " + o.quantization) +
                ": FP8 runs on CUDA GPUs of compute capability 8.9 or newer (use --device cuda); the CPU backend "
                "computes in fp32");
  }
  if (o.dtype != "auto" && o.dtype != "fp32") {
    throw Error("--dtype " + o.dtype + ": the CPU backend computes in fp32 (use --device cuda for " + o.dtype + ")");
  }
  refuse_cuda_flags(o);
  CpuBackendOptions cpu;
  cpu.num_threads = o.threads;
  cpu.max_batch_tokens = o.max_num_batched_tokens;
  cpu.int8_products = o.cpu_precision != "exact";
  cpu.int8_planes = cpu.int8_products && o.max_num_seqs <= kInt8PlanesMaxSeqs;
  if (o.kv_cache_dtype != "auto") cpu.kv_element = o.kv_cache_dtype == "bfloat16" ? KvElement::kBf16 : KvElement::kF32;
  cpu.kv_blocks_bytes = parse_memory_size("--kv-cache-memory", o.kv_cache_memory);
  return cpu;
}

EngineConfig engine_config(const EngineOptions& o) {
  if (!o.reasoning_parser.empty() && !is_reasoning_parser_name(o.reasoning_parser)) {
    throw Error("--reasoning-parser " + elide(o.reasoning_parser) + " is not a parser cbatch has (" +
                kReasoningParserNames + ")");
  }
  EngineConfig config;
  config.scheduler.mode = parse_mode(o.mode);
  config.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  config.scheduler.max_num_seqs = o.max_num_seqs;
  config.scheduler.block_size = o.block_size;
  config.scheduler.enable_prefix_caching = o.enable_prefix_caching;
  config.scheduler.max_loras = o.max_loras;
  config.kv_cache_blocks = o.kv_cache_blocks;
  config.state_snapshots = o.state_snapshots;
  config.kv_cache_memory_bytes = parse_memory_size("--kv-cache-memory", o.kv_cache_memory);
  if (o.kv_cache_blocks > 0 && config.kv_cache_memory_bytes > 0) {
    throw Error("--kv-cache-blocks and --kv-cache-memory both size the KV cache: give one of them");
  }
  config.default_max_tokens = o.max_tokens;
  config.seed = o.seed;
  config.quiet = o.quiet;
  config.sampling_threads = o.threads;
  config.reasoning_parser = o.reasoning_parser;
  return config;
}

RequestDefaults request_defaults(const EngineOptions& o) {
  RequestDefaults defaults;
  defaults.max_tokens = o.max_tokens;
  defaults.max_logprobs = o.max_logprobs;
  defaults.pooling = pooling_from_name(o.pooling);
  defaults.embed_task = o.task == "embed";
  return defaults;
}

const RerankTemplate* reranker_of(const EngineOptions& o) {
  if (o.reranker.empty()) return nullptr;
  const RerankTemplate* row = find_rerank_template(o.reranker);
  if (row == nullptr) throw Error("--reranker " + elide(o.reranker) + " is not a reranker cbatch has (qwen3)");
  return row;
}

}  // namespace

RunPlan resolve_run_plan(const EngineOptions& o) {
  RunPlan plan;
  plan.shard = shard_of(o);
  plan.model = model_source(o);
  const CudaKernelOptions kernels = parse_cuda_kernel_flags(o.cuda_kernels, o.cuda_profile);  // in every build
  plan.device = resolve_device(o);
  if (plan.device == Device::kCuda) {
    plan.cuda = cuda_options(o, kernels);
  } else {
    plan.cpu = cpu_options(o);
  }
  plan.engine = engine_config(o);
  plan.requests = request_defaults(o);
  plan.task = o.task == "generate" ? Task::kGenerate : o.task == "embed" ? Task::kEmbed : Task::kAuto;
  plan.chat_template = o.chat_template;
  plan.reranker = reranker_of(o);
  plan.lora_modules = o.lora_modules;
  plan.max_lora_rank = o.max_lora_rank;
  return plan;
}

namespace {

// The --lora-modules adapters, checked against the model (warnings on stderr); null when there are none.
std::shared_ptr<const std::vector<LoraAdapter>> load_loras(const RunPlan& plan, const Model& model) {
  if (plan.lora_modules.empty()) return nullptr;
  std::vector<std::string> warnings;
  auto adapters = std::make_shared<std::vector<LoraAdapter>>(
      load_lora_adapters(plan.lora_modules, model.config, model.path, plan.max_lora_rank, warnings));
  for (const std::string& w : warnings) std::fprintf(stderr, "cbatch: warning: %s\n", w.c_str());
  return adapters;
}

// --chat-template, else "harmony" for gpt-oss models (their format is built in), else "" (the model's own).
std::string chat_template_name(const RunPlan& plan, const Model& model) {
  if (!plan.chat_template.empty()) return plan.chat_template;
  const std::string& arch = model.config.architecture;
  return arch == "gpt-oss" || arch == "gpt_oss" || arch == "gptoss" ? "harmony" : "";
}

}  // namespace

ModelPlan resolve_model_plan(const RunPlan& plan, const Model& model) {
  std::shared_ptr<const std::vector<LoraAdapter>> loras = load_loras(plan, model);
  if (plan.task == Task::kGenerate && model.config.is_encoder()) {
    throw Error("--task generate: the model is an encoder (" + model.config.architecture + "), it cannot generate text");
  }
  EngineConfig engine = plan.engine;
  if (loras != nullptr) {
    for (const LoraAdapter& adapter : *loras) engine.lora_names.push_back(adapter.name);
  }
  std::optional<RerankFormat> rerank;
  if (plan.reranker != nullptr) rerank = resolve_rerank_format(*plan.reranker, *model.tokenizer);
  return ModelPlan{std::move(loras), std::move(engine),
                   ChatFormat(model.chat_template, chat_template_name(plan, model), *model.tokenizer), rerank};
}

std::unique_ptr<Backend> make_backend(const RunPlan& plan, const ModelPlan& model_plan, Model& model) {
  std::unique_ptr<Backend> backend;
#ifdef CBATCH_HAVE_CUDA
  if (plan.device == Device::kCuda) {
    CudaBackendOptions cuda = plan.cuda;
    cuda.max_context = model.config.max_context;
    cuda.loras = model_plan.loras;
    backend = make_cuda_backend(model, cuda);
    take_tensors(model);  // uploaded: the host copies the loader made are freed
  }
#endif
  if (!backend) {
    CpuBackendOptions cpu = plan.cpu;
    cpu.loras = model_plan.loras;
    backend = make_cpu_backend(model, take_tensors(model), cpu);
  }
  give_back_free_heap();
  return backend;
}

void print_load_line(const Model& model, const Backend& backend, std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "[cbatch] loaded %s (%s, %s, %.1fM parameters) on %s in %.2f s\n", model.path.c_str(),
               model.format.c_str(), model.weight_dtype.c_str(), static_cast<double>(model.config.num_parameters()) / 1e6,
               backend.traits().device_name.c_str(), seconds);
  for (const std::string& note : model.notes) std::fprintf(stderr, "[cbatch] note: %s\n", note.c_str());
  for (const std::string& note : backend.traits().notes) std::fprintf(stderr, "[cbatch] note: %s\n", note.c_str());
}

}  // namespace cbatch
