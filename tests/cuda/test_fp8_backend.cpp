// The CUDA backend with --quantization fp8 against itself in bf16 on dummy models: logit error statistics
// (max abs, mean abs, relative RMS) and top-1 agreement over prefill and decode rows, printed for the
// record, with bounds from the numerics: E4M3 keeps 3 mantissa bits, so a weight or an activation is off by
// up to 2^-4 relative (rms 2^-4 * sqrt(E[1/m^2] / 3) ~ 0.025 over mantissas m), a GEMM of both ~0.036;
// the residual stream carries part of that to the logits. A bound of 0.15 for 2 layers (0.3 for the
// 16-layer 1B shape) is several times the expected error and far below garbage (1 and more); top-1 agreement
// of a random model's near-flat logits is only bounded loosely (0.5; chance is 1 / vocab). Also: the KV
// budget sees the smaller weights, and the refusals (fp32, shapes cuBLASLt cannot take, GPUs below 8.9).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "tests/engine/step_io.hpp"
#include "engine/base/error.hpp"
#include "engine/model/model.hpp"
#include "tests/cuda/fp8_gpu.hpp"
#include "tests/cuda/reference.hpp"

namespace cbatch::test {
namespace {

constexpr int kBlockSize = 16;
constexpr int kSeqs = 16;
constexpr int kBlocksPerSeq = 3;

// A dummy model (random weights generated on the device) of a Llama config with these sizes.
Model dummy_llama(int dim, int hidden, int heads, int kv_heads, int layers, int vocab) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("cbatch-fp8-test-" + std::to_string(getpid()) + ".json")).string();
  std::ofstream(path) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": )" << dim
                      << R"(, "intermediate_size": )" << hidden << R"(, "num_attention_heads": )" << heads
                      << R"(, "num_key_value_heads": )" << kv_heads << R"(, "head_dim": 64, "num_hidden_layers": )"
                      << layers << R"(, "vocab_size": )" << vocab
                      << R"(, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
                          "tie_word_embeddings": true})";
  ModelSource source;
  source.path = "dummy:" + path;
  source.dummy_seed = 7;
  Model model = load_model(source);
  std::filesystem::remove(path);
  return model;
}

// Step 1 prefills kSeqs sequences of 5 .. 35 tokens (the last 4 rows of each want logits); step 2 decodes
// one token of each.
std::vector<RaggedBatch> prefill_then_decode(int vocab) {
  std::vector<RaggedBatch> steps(2);
  for (int s = 0; s < kSeqs; ++s) {
    const int prompt = 5 + (7 * s) % 31;
    for (int step = 0; step < 2; ++step) {
      RaggedBatch& b = steps[static_cast<size_t>(step)];
      if (b.query_start.empty()) b.query_start.push_back(0);
      const int first = step == 0 ? 0 : prompt, rows = step == 0 ? prompt : 1;
      for (int p = first; p < first + rows; ++p) {
        b.token_ids.push_back((131 * s + 17 * p + 3) % vocab);
        b.positions.push_back(p);
        b.slot_mapping.push_back((s * kBlocksPerSeq + p / kBlockSize) * kBlockSize + p % kBlockSize);
        if (p >= first + rows - 4) b.logits_rows.push_back(b.num_tokens() - 1);
      }
      b.query_start.push_back(b.num_tokens());
      b.seq_lens.push_back(first + rows);
      for (int j = 0; j < kBlocksPerSeq; ++j) b.block_tables.push_back(s * kBlocksPerSeq + j);
      b.max_blocks_per_seq = kBlocksPerSeq;
      b.max_seq_len = std::max(b.max_seq_len, first + rows);
      b.max_query_len = std::max(b.max_query_len, rows);
    }
  }
  return steps;
}

CudaBackendOptions options(bool fp8, ComputeDType dtype = ComputeDType::kBF16) {
  CudaBackendOptions o;
  o.dtype = dtype;
  o.max_batch_tokens = 1024;
  o.max_num_seqs = 4 * kSeqs;
  o.max_context = kBlockSize * kBlocksPerSeq;
  o.fp8_weights = fp8;
  return o;
}

// The logits of every step's logits rows, one row after another.
std::vector<float> run_logits(const Model& model, bool fp8, ComputeDType dtype = ComputeDType::kBF16) {
  std::unique_ptr<Backend> backend = make_cuda_backend(model, options(fp8, dtype));
  backend->allocate_kv_cache(KvCacheSpec{kSeqs * kBlocksPerSeq, kBlockSize});
  std::vector<float> all;
  for (const RaggedBatch& batch : prefill_then_decode(model.config.vocab_size)) {
    StepIo out;
    out.want_logits = true;
    backend->forward(batch, out, out);
    all.insert(all.end(), out.logits.begin(), out.logits.end());
  }
  return all;
}

struct LogitStats {
  double max_abs = 0.0, mean_abs = 0.0, rel_rms = 0.0, top1 = 0.0;
};

LogitStats compare_logits(const std::vector<float>& test, const std::vector<float>& ref, int vocab) {
  REQUIRE(test.size() == ref.size());
  LogitStats s;
  double diff_sq = 0.0, ref_sq = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(static_cast<double>(test[i]) - ref[i]);
    s.max_abs = std::isfinite(d) ? std::max(s.max_abs, d) : INFINITY;
    s.mean_abs += d;
    diff_sq += d * d;
    ref_sq += static_cast<double>(ref[i]) * ref[i];
  }
  const size_t rows = ref.size() / static_cast<size_t>(vocab);
  int agree = 0;
  for (size_t r = 0; r < rows; ++r) {
    agree += argmax_ref(test.data() + r * vocab, vocab) == argmax_ref(ref.data() + r * vocab, vocab);
  }
  s.mean_abs /= static_cast<double>(ref.size());
  s.rel_rms = std::sqrt(diff_sq / ref_sq);
  s.top1 = static_cast<double>(agree) / static_cast<double>(rows);
  MESSAGE("fp8 vs bf16 logits over " << rows << " rows: max abs " << s.max_abs << ", mean abs " << s.mean_abs
                                     << ", relative RMS " << s.rel_rms << ", top-1 agreement " << s.top1);
  return s;
}

void check_error_names(const Model& model, const CudaBackendOptions& o, const std::string& needle) {
  try {
    make_cuda_backend(model, o);
    FAIL("accepted: expected an error naming " << needle);
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("--quantization fp8 with --dtype fp32 is refused before any GPU work") {
    const Model model = dummy_llama(256, 320, 4, 2, 1, 1000);
    check_error_names(model, options(true, ComputeDType::kF32), "--dtype fp32");
  }
}

TEST_CASE("fp8 weights: logits against the bf16 backend on a small dummy model (bf16 and fp16 compute)") {
  if (!has_fp8_gpu()) return;
  const Model model = dummy_llama(256, 320, 4, 2, 2, 1000);
  const std::vector<float> bf16 = run_logits(model, false);
  for (ComputeDType dtype : {ComputeDType::kBF16, ComputeDType::kF16}) {  // FP8 GEMMs writing bf16, fp16
    CAPTURE(dtype == ComputeDType::kF16);
    const LogitStats s = compare_logits(run_logits(model, true, dtype), bf16, model.config.vocab_size);
    CHECK(s.rel_rms > 0.0);  // the fp8 path really ran
    CHECK(s.rel_rms < 0.15);
    CHECK(s.top1 > 0.5);
  }
}

TEST_CASE("fp8 weights: the 1B dummy shape's logit statistics, and the KV budget sees the saving") {
  if (!has_fp8_gpu()) return;
  const Model model = dummy_llama(2048, 8192, 32, 8, 16, 128256);
  const LogitStats s = compare_logits(run_logits(model, true), run_logits(model, false), model.config.vocab_size);
  CHECK(s.rel_rms > 0.0);
  CHECK(s.rel_rms < 0.3);
  CHECK(s.top1 > 0.5);
  int64_t blocks[2] = {0, 0};
  double bytes_per_param[2] = {0.0, 0.0}, gemm_tflops[2] = {0.0, 0.0};
  for (int fp8 = 0; fp8 < 2; ++fp8) {
    std::unique_ptr<Backend> backend = make_cuda_backend(model, options(fp8 == 1));
    blocks[fp8] = backend->max_kv_blocks(kBlockSize);
    bytes_per_param[fp8] = backend->traits().weight_bytes_per_param;
    gemm_tflops[fp8] = backend->measure_peaks().flops_per_s * 1e-12;
  }
  MESSAGE("roofline GEMM ceiling: bf16 " << gemm_tflops[0] << " TFLOP/s, fp8 " << gemm_tflops[1] << " TFLOP/s");
  CHECK(gemm_tflops[1] > gemm_tflops[0]);  // Hopper's and Ada's FP8 tensor cores have twice the bf16 rate
  // The layers' linear weights shrink from 2 bytes to 1 a parameter: about 0.97 GB more for the cache.
  const double saved = static_cast<double>(model.config.num_layers) * 2048.0 * (3072 + 2048 + 3 * 8192);
  const double block_bytes = 2.0 * 16 * kBlockSize * 512 * 2;  // K and V, 16 layers, kv_dim 512, bf16
  MESSAGE("KV blocks: bf16 weights " << blocks[0] << ", fp8 weights " << blocks[1]);
  CHECK(static_cast<double>(blocks[1] - blocks[0]) > 0.9 * saved / block_bytes);
  CHECK(bytes_per_param[0] == 2.0);
  CHECK(bytes_per_param[1] == 1.0);
}

TEST_CASE("fp8 weights: a model whose shapes cuBLASLt's FP8 GEMM cannot take is refused naming the tensor") {
  if (!has_fp8_gpu()) return;
  const Model model = dummy_llama(256, 300, 4, 2, 1, 1000);
  check_error_names(model, options(true), "'model.layers.0.mlp.gate_proj.weight' has shape (300, 256)");
}

TEST_CASE("--quantization fp8 is refused below compute capability 8.9") {
  if (cuda_compute_capability(0) >= 89) {
    MESSAGE("SKIPPED: " << cuda_device_description(0) << " has FP8; the refusal needs an older GPU");
    return;
  }
  const Model model = dummy_llama(256, 320, 4, 2, 1, 1000);
  check_error_names(model, options(true), "compute capability 8.9");
}

}  // namespace cbatch::test
