// The CUDA backend's options (make_cuda_backend, cuda_backend.hpp): the compute dtype, the sizes it is built
// for, FP8 weights and cache, LoRA adapters, and the kernel switches of the command line. Plain structs with
// no CUDA include, so cmd/ builds them in every build.
#pragma once
#include <memory>
#include <vector>

#include "engine/model/lora_adapter.hpp"

namespace cbatch {

enum class ComputeDType { kBF16, kF16, kF32 };

// The kernel of single-row (decode) sequences' attention: the stream split-KV tensor-core kernel (where its
// shared memory does not fit the GPU, the 16-key one), the 16-key split-KV tensor-core kernel, the CUDA-core
// kernel, or none (the decode rows go through the paged attention of the multi-row sequences). fp32 and
// head_dims without a tensor-core build always take the CUDA-core kernel.
enum class DecodeAttention { kStream, kTensorCores16, kCudaCores, kPaged };

// The kernels a run picks where there is a choice, set from the command line (--cuda-kernel NAME=VALUE and
// --cuda-profile, docs/cuda.md): the defaults are the fast paths, the others are kept to compare with.
struct CudaKernelOptions {
  DecodeAttention decode = DecodeAttention::kStream;  // decode=stream|tensor-cores-16|cuda-cores|paged
  bool prefill_tensor_cores = true;  // prefill=on: multi-row tiles in bf16/fp16 on prefill_attention; off: CUDA cores
  bool device_sampling = true;       // sampling=device: rows drawn by sample_rows; host: logits to the host Sampler
  bool grouped_moe_gemm = true;      // moe-gemm=grouped (where cuBLAS has it, 12.5+); loop: one GEMM per expert
  bool quantized_experts = true;     // moe-experts=blocks: MXFP4/GGUF/FP8 experts kept so; dequant: decoded to T
  bool chunked_deltanet = true;      // deltanet=chunked: runs of 64+ rows on the chunked delta rule; recurrent:
                                     // every row token by token (bit-identical across budgets)
  bool chunked_mamba_scan = true;    // mamba-scan=chunked: runs of 64+ rows on the SSD scan; recurrent: token by token
  bool linear_blocks = true;         // weights=blocks: linear weights kept in the model's blocks; dequant: decoded to T
  bool profile = false;              // --cuda-profile: device time of each phase of the step, printed at the end
};

struct CudaBackendOptions {
  ComputeDType dtype = ComputeDType::kBF16;
  int max_batch_tokens = 8192;          // rows of the largest RaggedBatch forward() will see
  int max_num_seqs = 256;               // sequences of the largest batch
  int max_context = 0;                  // longest sequence (prompt + generated) in tokens
  float gpu_memory_utilization = 0.9f;  // fraction of the GPU's memory cbatch may use in total
  int device_index = 0;
  bool fp8_weights = false;             // --quantization fp8: linear layers' weights in FP8 E4M3 (sm_89+)
  bool fp8_kv_cache = false;            // --kv-cache-dtype fp8: the paged KV cache in FP8 E4M3 (sm_89+)
  // A hybrid model's state slots reserved beyond max_num_seqs for the prefix cache's snapshots of recurrent
  // state (KvCacheSpec::num_state_snapshots); 0 without prefix caching.
  int state_snapshots = 0;
  // LoRA adapters (id i + 1 = loras[i]), uploaded at load; RaggedBatch::lora_ids picks them per sequence.
  std::shared_ptr<const std::vector<LoraAdapter>> loras;
  CudaKernelOptions kernels;
};

}  // namespace cbatch
