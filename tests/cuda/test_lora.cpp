// The LoRA kernels on the GPU (LoraWeights::add: the pack uploaded in T, shrink then expand) against the CPU
// backend's CpuLoraSet::add on lora_case.hpp's cases, the ones test_lora_emulated.cpp runs through the block
// emulator; and the whole CUDA backend (fp32) with two adapters on a 2-layer SmolLM2 shape, a prefill step and a decode step
// mixing them with base-model sequences, against the CPU backend with the same adapters (logits), with a
// check that the adapters change the logits. Batches naming an adapter never loaded are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/lora/lora_weights.hpp"
#include "tests/engine/step_io.hpp"
#include "engine/base/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "tests/cuda/lora_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

template <typename T>
void check_lora_gpu(int num_rows) {
  LoraCase c = make_lora_case(num_rows, 11);
  round_lora_case<T>(c);
  LoraWeights<T> weights(c.adapters, LoraCase::kLayers, num_rows);
  std::vector<LoraTile> tiles;
  build_lora_tiles(c.row_adapter.data(), num_rows, tiles);
  DeviceBuffer<LoraTile> d_tiles(tiles.size());
  CUDA_CHECK(cudaMemcpy(d_tiles.get(), tiles.data(), d_tiles.bytes(), cudaMemcpyHostToDevice));
  for (int layer = 0; layer < LoraCase::kLayers; ++layer) {
    for (const LoraProductCase& pc : LoraCase::products()) {
      CAPTURE(layer);
      CAPTURE(static_cast<int>(pc.product));
      const std::vector<float> x = round_to<T>(random_vector(static_cast<size_t>(num_rows) * pc.in, 3 + layer));
      const std::vector<float> y0 = round_to<T>(random_vector(static_cast<size_t>(num_rows) * pc.width, 5, -0.1f, 0.1f));
      const std::vector<double> want = lora_ref(c, pc.product, layer, x, pc.in, y0, pc.width);
      auto d_x = to_device<T>(x);
      auto d_y = to_device<T>(y0);
      weights.add(pc.product, layer, d_tiles.get(), static_cast<int>(tiles.size()), d_x.get(), pc.in, d_y.get(),
                  pc.width, pc.width, nullptr);
      const std::vector<float> out = to_host(d_y);
      CHECK(rel_error(out, want) < tolerance<T>());
      size_t base_changed = 0;
      for (int r = 0; r < num_rows; ++r) {
        for (int j = 0; j < pc.width && c.row_adapter[static_cast<size_t>(r)] == 0; ++j) {
          base_changed += out[static_cast<size_t>(r) * pc.width + j] != y0[static_cast<size_t>(r) * pc.width + j];
        }
      }
      CHECK(base_changed == 0);
    }
  }
}

// SmolLM2-135M's shape with random weights, its first two layers (dim 576, q 576, kv 192, hidden 1536).
Model small_model() {
  ModelSource source{"dummy:" + std::string(CBATCH_SOURCE_DIR) + "/examples/models/smollm2-135m.json", "", 0};
  source.dummy_layers = 2;
  return load_model(source);
}

// Two adapters: 1 on q, v, o, down (rank 8); 2 on fused q|k|v (rank 4) and gate, up (rank 16).
std::shared_ptr<const std::vector<LoraAdapter>> two_adapters(const ModelConfig& c) {
  auto adapters = std::make_shared<std::vector<LoraAdapter>>(2);
  const int q = c.q_dim(), kv = c.kv_dim(), dim = c.dim, hidden = c.hidden_dim;
  uint32_t seed = 40;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    auto& a = (*adapters)[0].pairs;
    a.push_back(make_lora_pair(layer, LoraProduct::kQkv, 0, q, dim, 8, 0.02f, seed += 2));
    a.push_back(make_lora_pair(layer, LoraProduct::kQkv, q + kv, kv, dim, 8, 0.02f, seed += 2));
    a.push_back(make_lora_pair(layer, LoraProduct::kO, 0, dim, q, 8, 0.02f, seed += 2));
    a.push_back(make_lora_pair(layer, LoraProduct::kDown, 0, dim, hidden, 8, 0.02f, seed += 2));
    auto& b = (*adapters)[1].pairs;
    b.push_back(make_lora_pair(layer, LoraProduct::kQkv, 0, q + 2 * kv, dim, 4, 0.02f, seed += 2));
    b.push_back(make_lora_pair(layer, LoraProduct::kGateUp, 0, hidden, dim, 16, 0.02f, seed += 2));
    b.push_back(make_lora_pair(layer, LoraProduct::kGateUp, hidden, hidden, dim, 16, 0.02f, seed += 2));
  }
  (*adapters)[0].name = "one";
  (*adapters)[1].name = "two";
  return adapters;
}

// Sequence s has `lens[s]` rows this step at positions from `start[s]`, in block s of 16.
RaggedBatch lora_batch(const std::vector<int>& start, const std::vector<int>& lens, const std::vector<int32_t>& ids) {
  RaggedBatch b;
  b.max_blocks_per_seq = 1;
  b.query_start.push_back(0);
  for (size_t s = 0; s < lens.size(); ++s) {
    for (int i = 0; i < lens[s]; ++i) {
      const int pos = start[s] + i;
      b.token_ids.push_back(3 + static_cast<int>((s * 37 + static_cast<size_t>(pos) * 11) % 4000));
      b.positions.push_back(pos);
      b.slot_mapping.push_back(static_cast<int>(s) * 16 + pos);
    }
    b.query_start.push_back(b.num_tokens());
    b.seq_lens.push_back(start[s] + lens[s]);
    b.block_tables.push_back(static_cast<int>(s));
    b.max_seq_len = std::max(b.max_seq_len, start[s] + lens[s]);
    b.max_query_len = std::max(b.max_query_len, lens[s]);
    b.logits_rows.push_back(b.num_tokens() - 1);
  }
  b.lora_ids = ids;
  return b;
}

std::vector<double> step_logits(Backend& backend, const RaggedBatch& batch) {
  StepIo out;
  out.want_logits = true;
  backend.forward(batch, out, out);
  return std::vector<double>(out.logits.begin(), out.logits.end());
}

}  // namespace

TEST_CASE("lora shrink + expand on the GPU: the CPU's grouped product over mixed adapters (fp32, bf16, fp16)") {
  check_lora_gpu<float>(37);
  check_lora_gpu<__nv_bfloat16>(30);
  check_lora_gpu<__half>(30);
  check_lora_gpu<float>(300);  // many tiles
}

TEST_CASE("CUDA backend with LoRA adapters matches the CPU backend's logits (fp32)") {
  const Model model = small_model();
  const auto adapters = two_adapters(model.config);
  CpuBackendOptions cpu_options;
  cpu_options.num_threads = 2;
  cpu_options.max_batch_tokens = 64;
  cpu_options.loras = adapters;
  CudaBackendOptions cuda_options;
  cuda_options.dtype = ComputeDType::kF32;
  cuda_options.max_batch_tokens = 64;
  cuda_options.max_num_seqs = 8;
  cuda_options.max_context = 64;
  cuda_options.loras = adapters;
  std::unique_ptr<Backend> cpu = make_cpu_backend(model, cpu_options);
  std::unique_ptr<Backend> cuda = make_cuda_backend(model, cuda_options);
  cpu->allocate_kv_cache(KvCacheSpec{8, 16});
  cuda->allocate_kv_cache(KvCacheSpec{8, 16});
  const std::vector<int32_t> ids = {1, 0, 2, 2, 1};
  const RaggedBatch prefill = lora_batch({0, 0, 0, 0, 0}, {11, 5, 9, 3, 1}, ids);
  const RaggedBatch decode = lora_batch({11, 5, 9, 3, 1}, {1, 1, 1, 1, 1}, ids);
  for (const RaggedBatch* batch : {&prefill, &decode}) {
    const std::vector<double> want = step_logits(*cpu, *batch);
    const std::vector<double> cuda_logits = step_logits(*cuda, *batch);
    const std::vector<float> got(cuda_logits.begin(), cuda_logits.end());
    CHECK(rel_error(got, want) < 1e-4);
  }
  // The adapters matter: the same decode step without them differs by far more than the tolerance.
  RaggedBatch base = decode;
  base.lora_ids.assign(ids.size(), 0);
  const std::vector<double> with = step_logits(*cpu, decode);
  const std::vector<double> without = step_logits(*cpu, base);
  CHECK(rel_error(std::vector<float>(without.begin(), without.end()), with) > 1e-2);
  RaggedBatch unknown = decode;
  unknown.lora_ids[0] = 3;
  CHECK_THROWS_AS(step_logits(*cuda, unknown), Error);
}

// Both refusals come before the device is opened: host tests.
TEST_CASE("CUDA backend refuses LoRA adapters with FP8 weights" * doctest::test_suite("host")) {
  const Model model = small_model();
  CudaBackendOptions options;
  options.dtype = ComputeDType::kBF16;
  options.max_batch_tokens = 64;
  options.max_num_seqs = 8;
  options.max_context = 64;
  options.fp8_weights = true;
  options.loras = two_adapters(model.config);
  CHECK_THROWS_WITH_AS(make_cuda_backend(model, options), doctest::Contains("--lora-modules"), Error);
}

TEST_CASE("CUDA backend refuses LoRA adapters on mixture-of-experts FFNs" * doctest::test_suite("host")) {
  ModelSource source{"dummy:" + std::string(CBATCH_SOURCE_DIR) + "/examples/models/qwen3-30b-a3b.json", "", 0};
  source.dummy_layers = 1;
  const Model model = load_model(source);
  const ModelConfig& c = model.config;
  REQUIRE(c.is_sparse(0));
  auto adapters = std::make_shared<std::vector<LoraAdapter>>(1);
  (*adapters)[0].name = "moe";
  (*adapters)[0].pairs.push_back(make_lora_pair(0, LoraProduct::kQkv, 0, c.q_dim(), c.dim, 2, 1.0f, 3));
  CudaBackendOptions options;
  options.loras = adapters;
  if (cuda_device_count() == 0) {  // attention targets pass the check: the backend fails on the missing device
    std::string message;
    try {
      make_cuda_backend(model, options);
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK(message != "");
    CHECK(message.find("mixture-of-experts") == std::string::npos);
  }
  (*adapters)[0].pairs.push_back(make_lora_pair(0, LoraProduct::kDown, 0, c.dim, 8, 2, 1.0f, 5));
  CHECK_THROWS_WITH_AS(make_cuda_backend(model, options), doctest::Contains("'moe'"), Error);
  CHECK_THROWS_WITH_AS(make_cuda_backend(model, options), doctest::Contains("mixture-of-experts layer"), Error);
}

}  // namespace cbatch::test
