// What the CPU backend is built with (cmd/ resolves the flags into it): threads, memory, the precision of
// its products, the KV cache's element and the LoRA adapters.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/cpu/cpu_attention_params.hpp"
#include "engine/model/lora_adapter.hpp"

namespace cbatch {

struct CpuBackendOptions {
  int num_threads = 0;              // 0 = all hardware threads
  int max_batch_tokens = 2048;      // rows of the largest batch (sizes the activation buffers)
  int64_t kv_cache_bytes = 1LL << 30;  // memory the KV cache may take when --kv-cache-blocks is not set
  int64_t kv_blocks_bytes = 0;      // --kv-cache-memory: the KV blocks' memory (a hybrid's state slots apart)
  bool keep_blocks = true;          // false: expand quantized weights to fp32 panels at load (tests)
  // Block-type weights multiply as 8-bit integers against each activation row quantized to 8 bits
  // (--cpu-precision fast; still batch-invariant); false: the fp32 values, exactly (cpu_matmul.hpp).
  bool int8_products = false;
  // With int8_products: the 5- and 6-bit types (Q5_0, Q5_1, Q5_K, Q6_K) keep their codes in planes, 5.5-6.6
  // bits a weight instead of 8.5-9, for runs whose steps carry few sequences (kInt8PlanesMaxSeqs): a
  // product of a few rows streams its weights, one of many is bound by the arithmetic, which planes add to.
  // The products' bits are the same either way.
  bool int8_planes = false;
  // What the KV cache holds (cpu_attention_params.hpp; --kv-cache-dtype): fp32, or bf16 (half the memory and the bytes
  // attention reads). Unset: bf16 where the QKV product is 8-bit (int8_products and quantized weights),
  // else fp32.
  std::optional<KvElement> kv_element;
  // LoRA adapters (id i + 1 = loras[i]), packed at load; RaggedBatch::lora_ids picks them per sequence.
  std::shared_ptr<const std::vector<LoraAdapter>> loras;
};

// The most sequences a step may carry for int8_planes to pay. Measured on the 2-core AVX-512 VNNI
// development machine: one thread's 4-row tile of Q6_K runs about 255 GOP/s in planes against 320 in
// bytes (Q5_K 308 against 347), while two threads stream about 30 GB/s; so a product is bound by memory up
// to about 7 rows in planes and 11 in bytes, and planes are faster up to about 9 rows (Q5_K: 11).
constexpr int kInt8PlanesMaxSeqs = 8;

}  // namespace cbatch
