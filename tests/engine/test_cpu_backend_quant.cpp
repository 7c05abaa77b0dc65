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
#include "ragged_steps.hpp"

using namespace cbatch;

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
    const std::vector<float> logits[2] = {testing::two_prompts_then_decode(*blocked),
                                           testing::two_prompts_then_decode(*dense)};
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
  std::vector<float> logits[3];
  int i = 0;
  for (Backend* backend : {blocked.get(), dense.get(), f32_backend.get()}) {
    int experts_touched = 0;
    logits[i++] = testing::two_prompts_then_decode(*backend, 0, &experts_touched, 2);  // a window and a full group
    CHECK(experts_touched > 2);
  }
  REQUIRE(logits[0].size() == 3 * 320u);
  REQUIRE(logits[1].size() == logits[0].size());
  CHECK(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)) == 0);
  CHECK(logits[2] != logits[0]);
  bool finite = true;
  for (float v : logits[0]) finite = finite && std::isfinite(v);
  CHECK(finite);
}
