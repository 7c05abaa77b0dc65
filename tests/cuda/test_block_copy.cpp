// Copy-on-write of KV blocks (n > 1 samples) on the CUDA backend against the CPU backend: a prompt is
// prefilled into two blocks, the partial second block is copied (RaggedBatch.block_copies) and two
// samples decode different tokens, one through the original block and one through the copy; their
// logits must match the CPU backend's, which the end-to-end tests prove equal to unshared runs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "tests/engine/step_io.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/model/model.hpp"

namespace cbatch::test {
namespace {

constexpr int kBlock = 16;

Model tiny_model() {
  const std::string path = (std::filesystem::temp_directory_path() / "cbatch_block_copy_config.json").string();
  std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 128, "intermediate_size": 192,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 500,
      "max_position_embeddings": 128})";
  return load_model(ModelSource{"dummy:" + path, "", 3});
}

// Rows [first, first + n) of one sequence through `table`, sampling its last row.
void add_seq(RaggedBatch& b, const std::vector<int32_t>& table, const std::vector<int32_t>& tokens, int first, int n) {
  for (int p = first; p < first + n; ++p) {
    b.token_ids.push_back(tokens[static_cast<size_t>(p)]);
    b.positions.push_back(p);
    b.slot_mapping.push_back(table[static_cast<size_t>(p / kBlock)] * kBlock + p % kBlock);
  }
  b.logits_rows.push_back(b.num_tokens() - 1);
  b.query_start.push_back(b.num_tokens());
  b.seq_lens.push_back(first + n);
  b.max_seq_len = std::max(b.max_seq_len, first + n);
  b.max_query_len = std::max(b.max_query_len, n);
  for (int j = 0; j < b.max_blocks_per_seq; ++j) {
    b.block_tables.push_back(j < static_cast<int>(table.size()) ? table[static_cast<size_t>(j)] : -1);
  }
}

std::vector<std::vector<float>> run_scenario(Backend& backend) {
  backend.allocate_kv_cache(KvCacheSpec{12, kBlock});
  std::vector<int32_t> a(23), b(23);
  for (int i = 0; i < 21; ++i) a[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] = 3 + (i * 37) % 490;
  a[21] = 11, b[21] = 400;  // the samples' first tokens differ
  const std::vector<int32_t> shared = {4, 7}, copy = {4, 9};
  std::vector<std::vector<float>> logits;
  RaggedBatch prefill;
  prefill.max_blocks_per_seq = 2;
  prefill.query_start.push_back(0);
  add_seq(prefill, shared, a, 0, 21);
  StepIo out;
  backend.forward(prefill, out, out);
  logits.push_back(out.logits);
  RaggedBatch decode;
  decode.max_blocks_per_seq = 2;
  decode.query_start.push_back(0);
  decode.block_copies = {7, 9};
  add_seq(decode, shared, a, 21, 1);
  add_seq(decode, copy, b, 21, 1);
  backend.forward(decode, out, out);
  logits.push_back(out.logits);
  return logits;
}

}  // namespace

TEST_CASE("CUDA backend: copy-on-write block copies give the CPU backend's logits") {
  const Model model = tiny_model();
  CpuBackendOptions cpu_options;
  cpu_options.max_batch_tokens = 64;
  auto cpu = make_cpu_backend(model, cpu_options);
  CudaBackendOptions options;
  options.dtype = ComputeDType::kF32;
  options.max_batch_tokens = 64;
  options.max_num_seqs = 4;
  options.max_context = 64;
  auto cuda = make_cuda_backend(model, options);
  const auto want = run_scenario(*cpu), got = run_scenario(*cuda);
  REQUIRE(want.size() == got.size());
  for (size_t step = 0; step < want.size(); ++step) {
    REQUIRE(want[step].size() == got[step].size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < want[step].size(); ++i) {
      err += (got[step][i] - want[step][i]) * (got[step][i] - want[step][i]);
      norm += want[step][i] * want[step][i];
    }
    CAPTURE(step);
    CHECK(std::sqrt(err / norm) < 1e-4);
  }
  // The two samples' logits differ (different tokens), so the check above saw both blocks.
  const std::vector<float>& two = got.back();
  CHECK(!std::equal(two.begin(), two.begin() + 500, two.begin() + 500));
}

}  // namespace cbatch::test
