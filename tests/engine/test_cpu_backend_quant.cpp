// The CPU backend on a tiny model whose matrices are stored in the K-quants, Q5_0/Q5_1, IQ4 and MXFP4 types
// (dim 256: whole super-blocks): kept in blocks, its logits are bit for bit those of the same weights
// expanded to fp32, over a prefill step of two prompts and a one-row decode step. (Every type's blocked
// matmul against matmul_ref: test_cpu_matmul.cpp.) Dummy MXFP4 experts (--dummy-dtype mxfp4) likewise.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/engine/step_io.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "test_blocks.hpp"
#include "test_files.hpp"
#include "test_model_fixture.hpp"

using namespace cbatch;

namespace {

// Rows [begin, end) of one sequence (KV block size 4, its blocks in `table`), the last one sampled.
void add_sequence(RaggedBatch& b, const std::vector<int32_t>& tokens, const std::vector<int32_t>& table, int begin,
                  int end) {
  if (b.query_start.empty()) b.query_start.push_back(0);
  for (int p = begin; p < end; ++p) {
    b.token_ids.push_back(tokens[p]);
    b.positions.push_back(p);
    b.slot_mapping.push_back(table[p / 4] * 4 + p % 4);
  }
  b.logits_rows.push_back(b.num_tokens() - 1);
  b.query_start.push_back(b.num_tokens());
  b.seq_lens.push_back(end);
  b.max_seq_len = std::max(b.max_seq_len, end);
  b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, static_cast<int>(table.size()));
}

void set_tables(RaggedBatch& b, const std::vector<const std::vector<int32_t>*>& tables) {
  for (auto* t : tables) {
    b.block_tables.insert(b.block_tables.end(), t->begin(), t->end());
    b.block_tables.insert(b.block_tables.end(), b.max_blocks_per_seq - t->size(), -1);
  }
}

}  // namespace

TEST_CASE("CPU backend: K-quant, Q5, IQ4 and MXFP4 matrices kept in blocks give the logits of their fp32 expansion") {
  for (bool tied : {false, true}) {
    testing::TestModelShape shape;
    shape.dim = 256;
    shape.hidden = 512;
    shape.tied = tied;
    Model model = testing::make_test_model(shape);
    auto blocks = std::make_shared<std::vector<std::vector<uint8_t>>>();
    unsigned seed = 1;
    auto quantize = [&](TensorView& t, DType dtype) {
      blocks->push_back(testing::random_blocks(dtype, t.rows, t.cols, seed++));
      t = testing::blocks_view(blocks->back(), dtype, t.rows, t.cols);
    };
    LayerTensors& l0 = model.tensors.layers[0];
    for (TensorView* t : {&l0[LayerTensor::kWq], &l0[LayerTensor::kWk], &l0[LayerTensor::kWv]}) quantize(*t, DType::kQ2_K);
    quantize(l0[LayerTensor::kWo], DType::kQ3_K);
    quantize(l0[LayerTensor::kGate], DType::kQ4_K);
    quantize(l0[LayerTensor::kUp], DType::kQ4_K);
    quantize(l0[LayerTensor::kDown], DType::kQ5_K);
    LayerTensors& l1 = model.tensors.layers[1];
    for (TensorView* t : {&l1[LayerTensor::kWq], &l1[LayerTensor::kWk], &l1[LayerTensor::kWv]}) quantize(*t, DType::kQ6_K);
    quantize(l1[LayerTensor::kWo], DType::kIQ4_XS);
    quantize(l1[LayerTensor::kGate], DType::kMXFP4);  // gate and up of one type: stacked, and kept in blocks
    quantize(l1[LayerTensor::kUp], DType::kMXFP4);
    quantize(l1[LayerTensor::kDown], DType::kQ5_0);
    quantize(model.tensors[ModelTensor::kEmbedding], DType::kQ5_1);
    if (tied) {
      model.tensors[ModelTensor::kLmHead] = model.tensors[ModelTensor::kEmbedding];
    } else {
      quantize(model.tensors[ModelTensor::kLmHead], DType::kIQ4_NL);
    }
    model.storage = blocks;

    CpuBackendOptions dense_options;
    dense_options.keep_blocks = false;
    auto blocked = make_cpu_backend(model, {});
    auto dense = make_cpu_backend(model, dense_options);
    CHECK(blocked->traits().weight_bytes_per_param < 1.5);
    CHECK(dense->traits().weight_bytes_per_param >= 4.0);
    const std::vector<int32_t> a = {1, 17, 42, 99, 5, 250, 3}, b = {1, 200, 201, 202, 7};
    const std::vector<int32_t> table_a = {5, 2}, table_b = {0, 30};
    std::vector<float> logits[2];
    for (Backend* backend : {blocked.get(), dense.get()}) {
      backend->allocate_kv_cache({32, 4});
      StepIo out;
      RaggedBatch prefill;  // two prompts: the many-row kernels
      add_sequence(prefill, a, table_a, 0, 6);
      add_sequence(prefill, b, table_b, 0, 5);
      set_tables(prefill, {&table_a, &table_b});
      backend->forward(prefill, out, out);
      std::vector<float>& got = logits[backend == dense.get()];
      got = out.logits;
      RaggedBatch decode;  // one row: the one-row kernels
      add_sequence(decode, a, table_a, 6, 7);
      set_tables(decode, {&table_a});
      backend->forward(decode, out, out);
      got.insert(got.end(), out.logits.begin(), out.logits.end());
    }
    CAPTURE(tied);
    REQUIRE(logits[0].size() == 3 * static_cast<size_t>(shape.vocab));
    REQUIRE(logits[1].size() == logits[0].size());
    CHECK(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)) == 0);
    bool finite = true;
    for (float v : logits[0]) finite = finite && std::isfinite(v);
    CHECK(finite);
  }
}

// --dummy-dtype mxfp4 on a tiny gpt-oss-like dummy: the experts' generated blocks kept in MXFP4 panels give the
// logits of the same blocks expanded to fp32 (tensor_rows_to_f32 decodes them), bit for bit, and differ from
// the f32 dummy's; the cost model reads the experts at 17/32 byte a weight, the fp32 ones at 4.
TEST_CASE("CPU backend: dummy MXFP4 experts kept in blocks give the logits of their fp32 expansion") {
  const test::TempFile config(R"({"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 8,
    "num_experts_per_tok": 2, "experts_per_token": 2, "sliding_window": 8, "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"], "swiglu_limit": 7.0, "attention_bias": true,
    "vocab_size": 320, "max_position_embeddings": 1024, "bos_token_id": 1, "eos_token_id": 2})", ".json");
  ModelSource source{"dummy:" + config.path(), "", 3};
  source.dummy_dtype = DType::kMXFP4;
  const Model model = load_model(source);
  source.dummy_dtype = DType::kF32;
  const Model f32 = load_model(source);
  CpuBackendOptions dense_options;
  dense_options.keep_blocks = false;
  auto blocked = make_cpu_backend(model, {});
  auto dense = make_cpu_backend(model, dense_options);
  auto f32_backend = make_cpu_backend(f32, {});
  CHECK(blocked->traits().expert_bytes_per_param == 17.0 / 32.0);
  CHECK(dense->traits().expert_bytes_per_param == 4.0);
  CHECK(f32_backend->traits().expert_bytes_per_param == 4.0);
  CHECK(blocked->traits().weight_bytes_per_param >= 4.0);  // everything else is fp32
  const std::vector<int32_t> a = {1, 17, 42, 99, 5, 250, 3}, b = {1, 200, 201, 202, 7};
  const std::vector<int32_t> table_a = {5, 2}, table_b = {0, 30};
  std::vector<float> logits[3];
  int i = 0;
  for (Backend* backend : {blocked.get(), dense.get(), f32_backend.get()}) {
    backend->allocate_kv_cache({32, 4});
    StepIo out;
    RaggedBatch prefill;
    add_sequence(prefill, a, table_a, 0, 6);
    add_sequence(prefill, b, table_b, 0, 5);
    set_tables(prefill, {&table_a, &table_b});
    backend->forward(prefill, out, out);
    CHECK(out.experts_touched > 2);
    logits[i] = out.logits;
    RaggedBatch decode;
    add_sequence(decode, a, table_a, 6, 7);
    set_tables(decode, {&table_a});
    backend->forward(decode, out, out);
    logits[i].insert(logits[i].end(), out.logits.begin(), out.logits.end());
    ++i;
  }
  REQUIRE(logits[0].size() == 3 * 320u);
  REQUIRE(logits[1].size() == logits[0].size());
  CHECK(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)) == 0);
  CHECK(logits[2] != logits[0]);
  bool finite = true;
  for (float v : logits[0]) finite = finite && std::isfinite(v);
  CHECK(finite);
}
