#include "cmd/engine_options.hpp"

#include "engine/base/elide.hpp"
#include "engine/io/rerank_template.hpp"
#include "engine/io/shard_spec.hpp"
#include "engine/text/chat_template.hpp"
#include "engine/text/reasoning_parser.hpp"

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
  app.add_option("--state-snapshots", o.state_snapshots,
                 "a hybrid model's recurrent-state snapshots for prefix caching (default: a quarter of the state "
                 "memory, at most one per KV block)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-cache-memory", o.kv_cache_memory,
                 "memory of the KV cache's blocks: bytes, or with a K, M or G suffix (default: every sequence slot "
                 "at full context, as far as memory allows)");
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
  app.add_option("--cuda-kernel", o.cuda_kernels,
                 "NAME=VALUE: a CUDA kernel other than the default, to compare with it (repeatable): "
                 "decode=stream|tensor-cores-16|cuda-cores|paged, prefill=on|off, sampling=device|host, "
                 "moe-gemm=grouped|loop, moe-experts=blocks|dequant, deltanet=chunked|recurrent, "
                 "mamba-scan=chunked|recurrent, weights=blocks|dequant")
      ->allow_extra_args(false)
      ->take_all();
  app.add_flag("--cuda-profile", o.cuda_profile,
               "CUDA: print the device time of each phase of the forward pass at the end");
}

void add_chat_template_option(CLI::App& app, std::string& name) {
  app.add_option("--chat-template", name,
                 "render chat messages with this template (" + chat_template_names_text() + ") instead of the model's own")
      ->check(CLI::IsMember(chat_template_names()));
}

}  // namespace cbatch
