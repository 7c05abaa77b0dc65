#include "cmd/engine_options.hpp"

#include <cstdio>
#include <cstdlib>

#include "engine/cpu/cpu_backend.hpp"
#include "engine/base/error.hpp"
#include "engine/base/elide.hpp"
#include "engine/text/chat_template.hpp"
#include "engine/text/reasoning_parser.hpp"

#ifdef CBATCH_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#endif

namespace cbatch {

void add_engine_options(CLI::App& app, EngineOptions& o) {
  app.add_option("--model", o.model, "GGUF file, Hugging Face directory, llama2.c .bin, or dummy:CONFIG.json")
      ->envname("CBATCH_MODEL");
  app.add_option("--tokenizer", o.tokenizer, "tokenizer.bin for llama2.c checkpoints");
  add_chat_template_option(app, o.chat_template);
  app.add_option("--reasoning-parser", o.reasoning_parser,
                 std::string("split chat outputs into reasoning_content and content (") + kReasoningParserNames + ")")
      ->check(CLI::Validator(
          [](std::string& name) {
            return is_reasoning_parser_name(name) ? std::string()
                                                  : elide(name) + " is not a parser cbatch has (" + kReasoningParserNames + ")";
          },
          "NAME"));
  app.add_option("--reranker", o.reranker,
                 "score /v1/score and /v1/rerank lines with this decoder reranker's template (qwen3: Qwen3-Reranker)")
      ->check(CLI::Validator(
          [](std::string& name) {
            return find_rerank_template(name) ? std::string() : elide(name) + " is not a reranker cbatch has (qwen3)";
          },
          "NAME"));
  app.add_option("--device", o.device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--mode", o.mode, "continuous, static or sequential")
      ->check(CLI::IsMember({"continuous", "static", "sequential"}));
  app.add_option("--dtype", o.dtype, "auto, bf16, fp16 or fp32 (CPU: fp32)")
      ->check(CLI::IsMember({"auto", "bf16", "fp16", "fp32"}));
  app.add_option("--quantization", o.quantization,
                 "fp8: weights quantized at load to FP8 E4M3 (CUDA, compute capability 8.9 or newer)")
      ->check(CLI::IsMember({"fp8"}));
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "auto (CUDA: the compute dtype; CPU: bfloat16 where the weights' products are 8-bit, else "
                 "float32), bfloat16 or float32 (CPU), fp8 (E4M3; CUDA, compute capability 8.9 or newer)")
      ->check(CLI::IsMember({"auto", "bfloat16", "float32", "fp8", "fp8_e4m3"}));
  app.add_option("--cpu-precision", o.cpu_precision,
                 "CPU products with quantized weights: fast (8-bit activations, integer dot products; the default) "
                 "or exact (the weights' fp32 values in fp32)")
      ->check(CLI::Validator(
          [](std::string& value) {
            return value == "fast" || value == "exact" ? std::string()
                                                       : "--cpu-precision " + value + ": expected fast or exact";
          },
          "fast|exact"));
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "token budget of one step")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-num-seqs", o.max_num_seqs, "sequences in one step")->check(CLI::Range(1, 65536));
  app.add_option("--block-size", o.block_size, "tokens per KV cache block")->check(CLI::Range(1, 1024));
  app.add_option("--kv-cache-blocks", o.kv_cache_blocks, "KV cache blocks (default: what memory allows)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--gpu-memory-utilization", o.gpu_memory_utilization, "fraction of GPU memory to use")
      ->check(CLI::Range(0.05, 1.0));
  app.add_option("--max-tokens", o.max_tokens, "max_tokens of requests that do not set it")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--max-logprobs", o.max_logprobs, "largest logprobs / prompt_logprobs / top_logprobs a request may ask")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--pooling", o.pooling, "pooling of embedding lines, over the model's sentence-transformers one")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  app.add_option("--task", o.task, "embed: a decoder model also takes embedding lines ('input'); auto: encoders "
                                   "embed, decoders generate")
      ->check(CLI::IsMember({"auto", "generate", "embed"}));
  app.add_option("--seed", o.seed, "base seed of per-request sampling");
  app.add_option("--dummy-dtype", o.dummy_dtype,
                 "dummy: models' linear weights: f32, q8_0 (random values quantized on the CPU, a quarter of the "
                 "memory), or mxfp4 (a mixture of experts' routed experts as MXFP4 blocks, as gpt-oss ships them)")
      ->check(CLI::IsMember({"f32", "q8_0", "mxfp4"}));
  app.add_option("--dummy-layers", o.dummy_layers, "dummy: models: only the config's first N layers (0: all)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--threads", o.threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--quiet", o.quiet, "no progress on stderr");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o.enable_prefix_caching,
               "reuse the KV blocks of shared prompt prefixes (default on)");
  app.add_option("--shard", o.shard,
                 "answer only shard I of N (0-based I): the input lines L with L mod N = I; auto: from "
                 "SLURM_ARRAY_TASK_ID/COUNT or JOB_COMPLETION_INDEX");
  app.add_option("--num-shards", o.num_shards, "N for --shard auto under a Kubernetes Indexed Job")
      ->check(CLI::Range(1, kMaxShards));
  app.add_option("--lora-modules", o.lora_modules,
                 "NAME=PATH: a LoRA adapter (PEFT directory or GGUF LoRA file) that requests pick by \"model\": NAME "
                 "(repeatable; CPU)")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--max-loras", o.max_loras, "LoRA adapters the sequences of one step may use")->check(CLI::Range(1, 1024));
  app.add_option("--max-lora-rank", o.max_lora_rank, "the largest LoRA rank accepted")->check(CLI::Range(1, 65536));
}

ShardSpec shard_of(const EngineOptions& o) {
  if (o.shard.empty()) {
    if (o.num_shards > 0) throw Error("--num-shards goes with --shard auto");
    return {};
  }
  return resolve_shard(o.shard, o.num_shards, process_environment());
}

std::optional<RerankFormat> rerank_format_for(const EngineOptions& o, const Model& model) {
  if (o.reranker.empty()) return std::nullopt;
  const RerankTemplate* row = find_rerank_template(o.reranker);
  if (row == nullptr) throw Error("--reranker " + elide(o.reranker) + " is not a reranker cbatch has (qwen3)");
  return resolve_rerank_format(*row, *model.tokenizer);
}

std::string chat_template_name(const EngineOptions& o, const Model& model) {
  if (!o.chat_template.empty()) return o.chat_template;
  const std::string& arch = model.config.architecture;
  return arch == "gpt-oss" || arch == "gpt_oss" || arch == "gptoss" ? "harmony" : "";
}

void add_chat_template_option(CLI::App& app, std::string& name) {
  app.add_option("--chat-template", name,
                 std::string("render chat messages with this template (") + kChatTemplateNames +
                     ") instead of the model's own")
      ->check(CLI::IsMember({"chatml", "llama3", "llama2", "gemma", "qwen", "qwen3", "mistral", "phi3", "harmony"}));
}

EngineConfig make_engine_config(const EngineOptions& o, Mode mode, const std::vector<LoraAdapter>* loras) {
  EngineConfig config;
  config.scheduler.max_loras = o.max_loras;
  if (loras != nullptr) {
    for (const LoraAdapter& adapter : *loras) config.lora_names.push_back(adapter.name);
  }
  config.scheduler.mode = mode;
  config.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  config.scheduler.max_num_seqs = o.max_num_seqs;
  config.scheduler.block_size = o.block_size;
  config.scheduler.enable_prefix_caching = o.enable_prefix_caching;
  config.kv_cache_blocks = o.kv_cache_blocks;
  config.default_max_tokens = o.max_tokens;
  config.seed = o.seed;
  config.quiet = o.quiet;
  config.sampling_threads = o.threads;
  if (!o.reasoning_parser.empty() && !is_reasoning_parser_name(o.reasoning_parser)) {
    throw Error("--reasoning-parser " + elide(o.reasoning_parser) + " is not a parser cbatch has (" +
                kReasoningParserNames + ")");
  }
  config.reasoning_parser = o.reasoning_parser;
  return config;
}

Model load_model_for(const EngineOptions& o) {
  if (o.model.empty()) throw Error("no model: pass --model PATH (or set CBATCH_MODEL); `make run` fetches the default one");
  ModelSource source;
  source.path = o.model;
  source.tokenizer_path = o.tokenizer;
  source.dummy_seed = o.seed;
  source.dummy_dtype = o.dummy_dtype == "q8_0" ? DType::kQ8_0 : o.dummy_dtype == "mxfp4" ? DType::kMXFP4 : DType::kF32;
  source.dummy_layers = o.dummy_layers;
  const bool is_dummy = o.model.rfind("dummy:", 0) == 0;
  if (!is_dummy && (o.dummy_dtype != "f32" || o.dummy_layers != 0)) {
    throw Error("--dummy-dtype and --dummy-layers apply to dummy: models only, not '" + o.model + "'");
  }
  return load_model(source);
}

std::shared_ptr<const std::vector<LoraAdapter>> load_loras_for(const EngineOptions& o, const Model& model) {
  if (o.lora_modules.empty()) return nullptr;
  std::vector<std::string> warnings;
  auto adapters = std::make_shared<std::vector<LoraAdapter>>(
      load_lora_adapters(o.lora_modules, model.config, model.path, o.max_lora_rank, warnings));
  for (const std::string& w : warnings) std::fprintf(stderr, "cbatch: warning: %s\n", w.c_str());
  return adapters;
}

namespace {

bool want_cuda(const EngineOptions& o) {
#ifdef CBATCH_HAVE_CUDA
  if (o.device == "cuda") {
    if (cuda_device_count() == 0) throw Error("--device cuda: no CUDA device is available");
    return true;
  }
  return o.device == "auto" && cuda_device_count() > 0;
#else
  if (o.device == "cuda") throw Error("--device cuda: this cbatch was built without CUDA support");
  return false;
#endif
}

}  // namespace

std::unique_ptr<Backend> make_backend(const EngineOptions& o, const Model& model,
                                      std::shared_ptr<const std::vector<LoraAdapter>> loras) {
  if (o.device == "cuda" && !o.cpu_precision.empty()) {
    throw Error("--cpu-precision " + o.cpu_precision + ": applies to the CPU backend only, not --device cuda");
  }
  if (want_cuda(o)) {
#ifdef CBATCH_HAVE_CUDA
    if (!o.cpu_precision.empty()) {
      throw Error("--cpu-precision " + o.cpu_precision + ": applies to the CPU backend only, and this run uses a "
                  "CUDA GPU (add --device cpu)");
    }
    CudaBackendOptions cuda;
    cuda.dtype = o.dtype == "fp32" ? ComputeDType::kF32 : o.dtype == "fp16" ? ComputeDType::kF16 : ComputeDType::kBF16;
    cuda.max_batch_tokens = std::max(o.max_num_batched_tokens, o.max_num_seqs);
    cuda.max_num_seqs = o.max_num_seqs;
    cuda.max_context = model.config.max_context;
    cuda.gpu_memory_utilization = static_cast<float>(o.gpu_memory_utilization);
    cuda.fp8_weights = o.quantization == "fp8";
    if (o.kv_cache_dtype == "bfloat16" || o.kv_cache_dtype == "float32") {
      throw Error("--kv-cache-dtype " + o.kv_cache_dtype + ": applies to the CPU backend (add --device cpu); on CUDA "
                  "the KV cache holds the compute dtype (--dtype) or fp8");
    }
    cuda.fp8_kv_cache = o.kv_cache_dtype != "auto";
    cuda.loras = std::move(loras);
    return make_cuda_backend(model, cuda);
#endif
  }
  if (!o.quantization.empty() || o.kv_cache_dtype.starts_with("fp8")) {
    throw Error(std::string(o.quantization.empty() ? "--kv-cache-dtype " + o.kv_cache_dtype : "--quantization " + o.quantization) +
                ": FP8 runs on CUDA GPUs of compute capability 8.9 or newer (use --device cuda); the CPU backend "
                "computes in fp32");
  }
  if (o.dtype != "auto" && o.dtype != "fp32") {
    throw Error("--dtype " + o.dtype + ": the CPU backend computes in fp32 (use --device cuda for " + o.dtype + ")");
  }
  CpuBackendOptions cpu;
  cpu.num_threads = o.threads;
  cpu.max_batch_tokens = o.max_num_batched_tokens;
  cpu.int8_products = o.cpu_precision != "exact";
  cpu.int8_planes = cpu.int8_products && o.max_num_seqs <= kInt8PlanesMaxSeqs;
  if (o.kv_cache_dtype != "auto") cpu.kv_element = o.kv_cache_dtype == "bfloat16" ? KvElement::kBf16 : KvElement::kF32;
  cpu.loras = std::move(loras);
  return make_cpu_backend(model, cpu);
}

void print_load_line(const Model& model, const Backend& backend, std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "[cbatch] loaded %s (%s, %s, %.1fM parameters) on %s in %.2f s\n", model.path.c_str(),
               model.format.c_str(), model.weight_dtype.c_str(), static_cast<double>(model.config.num_parameters()) / 1e6,
               backend.traits().device_name.c_str(), seconds);
}

}  // namespace cbatch
