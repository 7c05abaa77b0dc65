// dummy:CONFIG.json models: configs of real shapes from examples/models, deterministic random weights
// per seed, errors that name the config field, and the byte tokenizer they come with.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/model/model.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/random_weights.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

Model load_dummy(const std::string& example, uint64_t seed = 0) {
  return load_model(ModelSource{"dummy:" + test::source_path("examples/models/" + example), "", seed});
}

std::vector<float> first_row(const TensorView& t) {
  std::vector<float> row(static_cast<size_t>(t.cols));
  tensor_rows_to_f32(t, 0, 1, row.data());
  return row;
}

}  // namespace

TEST_CASE("dummy model: SmolLM2-135M config") {
  const Model model = load_dummy("smollm2-135m.json");
  const ModelConfig& c = model.config;
  CHECK(model.format == "dummy");
  CHECK(model.weight_dtype == "random");
  CHECK(c.dim == 576);
  CHECK(c.hidden_dim == 1536);
  CHECK(c.num_layers == 30);
  CHECK(c.num_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.head_dim == 64);
  CHECK(c.vocab_size == 49152);
  CHECK(c.max_context == 8192);
  CHECK(c.rope_theta == 100000.0f);
  CHECK(c.rms_eps == 1e-5f);
  CHECK(c.tied_embeddings);
  CHECK(c.rope_layout == RopeLayout::kHalves);
  CHECK(c.rope_scaling.type == RopeScalingType::kNone);
  CHECK(c.num_parameters() == 134515008);
  CHECK(model.tensors[ModelTensor::kLmHead].random.seed == model.tensors[ModelTensor::kEmbedding].random.seed);
  CHECK(model.tokenizer->kind() == "byte");
  CHECK(model.tokenizer->bos_id() == 1);
  CHECK(model.tokenizer->eos_ids() == std::vector<int32_t>{2});
}

TEST_CASE("dummy model: Llama 3.2 1B and 3.1 8B configs") {
  const Model small = load_dummy("llama-3.2-1b.json");
  CHECK(small.config.head_dim == 64);
  CHECK(small.config.num_kv_heads == 8);
  CHECK(small.config.tied_embeddings);
  CHECK(small.config.rope_scaling.type == RopeScalingType::kLlama3);
  CHECK(small.config.rope_scaling.factor == 32.0f);
  CHECK(small.config.rope_scaling.original_max_position == 8192);
  CHECK(small.config.max_context == 131072);
  CHECK(small.tokenizer->bos_id() == 128000);
  CHECK(small.tokenizer->eos_ids() == std::vector<int32_t>{128001, 128008, 128009});
  CHECK(small.config.num_parameters() == 1235814400);

  const Model big = load_dummy("llama-3.1-8b.json");
  CHECK(!big.config.tied_embeddings);
  CHECK(big.config.rope_scaling.factor == 8.0f);
  CHECK(big.config.num_parameters() == 8030261248);
  CHECK(big.tensors[ModelTensor::kLmHead].random.seed != big.tensors[ModelTensor::kEmbedding].random.seed);
}

TEST_CASE("dummy model: weights depend only on the seed") {
  const Model a = load_dummy("smollm2-135m.json", 7);
  const Model b = load_dummy("smollm2-135m.json", 7);
  const Model c = load_dummy("smollm2-135m.json", 8);
  const TensorView& wq = a.tensors.layers[3][LayerTensor::kWq];
  CHECK(first_row(wq) == first_row(b.tensors.layers[3][LayerTensor::kWq]));
  CHECK(first_row(wq) != first_row(c.tensors.layers[3][LayerTensor::kWq]));
  CHECK(first_row(wq) != first_row(a.tensors.layers[3][LayerTensor::kWk]));  // tensors differ from each other
  // Scales: linear weights within sqrt(3 / in_features), norms within 1 +- 0.1.
  float max_abs = 0.0f;
  for (float x : first_row(wq)) max_abs = std::max(max_abs, std::fabs(x));
  CHECK(max_abs <= std::sqrt(3.0f / 576.0f));
  CHECK(max_abs > 0.5f * std::sqrt(3.0f / 576.0f));
  for (float x : first_row(a.tensors[ModelTensor::kFinalNorm])) CHECK((x >= 0.9f && x <= 1.1f));
}

TEST_CASE("dummy model: a Qwen3-30B-A3B shape cut to its first layers, linear weights marked Q8_0") {
  ModelSource source{"dummy:" + test::source_path("examples/models/qwen3-30b-a3b.json"), "", 0};
  source.dummy_layers = 2;
  source.dummy_dtype = DType::kQ8_0;
  const Model model = load_model(source);
  const ModelConfig& c = model.config;
  CHECK(model.weight_dtype == "random q8_0");
  CHECK(c.num_layers == 2);
  CHECK(c.layer_sparse.size() == 2);
  CHECK(c.num_experts == 128);
  CHECK(c.experts_per_token == 8);
  CHECK(c.expert_hidden_dim == 768);
  REQUIRE(model.tensors.layers.size() == 2);
  const LayerTensors& l = model.tensors.layers[1];
  REQUIRE(l.experts.size() == 128);
  CHECK(l.experts[5][ExpertTensor::kDown].dtype == DType::kQ8_0);
  CHECK(l[LayerTensor::kWq].dtype == DType::kQ8_0);
  CHECK(l[LayerTensor::kRouter].dtype == DType::kQ8_0);
  CHECK(l[LayerTensor::kAttnNorm].dtype == DType::kF32);
  CHECK(model.tensors[ModelTensor::kEmbedding].dtype == DType::kF32);  // looked up row by row, never packed
  // The same seeds as the full model's first layers.
  source.dummy_layers = 0;
  source.dummy_dtype = DType::kF32;
  const Model full = load_model(source);
  CHECK(full.config.num_layers == 48);
  CHECK(first_row(l.experts[5][ExpertTensor::kDown]) == first_row(full.tensors.layers[1].experts[5][ExpertTensor::kDown]));
  source.dummy_layers = 49;
  CHECK(error_of([&] { load_model(source); }).find("has 48 layers") != std::string::npos);
}

TEST_CASE("dummy model: the gpt-oss-20b shape has its family's sinks, biases, router rule, clamp and windows") {
  ModelSource source{"dummy:" + test::source_path("examples/models/gpt-oss-20b.json"), "", 0};
  source.dummy_layers = 2;
  const Model model = load_model(source);
  const ModelConfig& c = model.config;
  CHECK(c.architecture == "gpt-oss");
  CHECK(c.head_dim == 64);
  CHECK(c.q_dim() == 4096);  // 64 heads of 64, not the hidden size 2880
  CHECK(c.layer_window == std::vector<int>{128, 0});
  CHECK(c.moe_router == MoeRouter::kTopkSoftmax);
  CHECK(c.activation == Activation::kSwigluClamped);
  CHECK(c.swiglu_limit == 7.0f);
  CHECK(c.swiglu_alpha == doctest::Approx(1.702));
  CHECK(c.rope_scaling.type == RopeScalingType::kYarn);
  CHECK(!c.rope_scaling.truncate);
  const LayerTensors& l = model.tensors.layers[1];
  CHECK(l[LayerTensor::kSinks].cols == 64);
  CHECK(l[LayerTensor::kBo].cols == 2880);
  CHECK(l[LayerTensor::kRouterBias].cols == 32);
  CHECK(l.experts[31][ExpertTensor::kGateBias].cols == 2880);
  CHECK(l.experts[31][ExpertTensor::kDownBias].cols == 2880);
  source.dummy_layers = 0;
  CHECK(load_model(source).config.num_parameters() / 100000000 == 209);  // 20.9 B, as published
}

// --dummy-dtype mxfp4: the routed experts are MXFP4 blocks generated from their tensor's seed (the function the
// CUDA generator calls per block), with about the f32 dummy's spread; every other weight stays as with f32.
TEST_CASE("dummy model: --dummy-dtype mxfp4 makes gpt-oss's routed experts MXFP4 blocks of the f32 spread") {
  ModelSource source{"dummy:" + test::source_path("examples/models/gpt-oss-20b.json"), "", 5};
  source.dummy_layers = 1;
  source.dummy_dtype = DType::kMXFP4;
  const Model model = load_model(source);
  CHECK(model.weight_dtype == "random mxfp4");
  const LayerTensors& l = model.tensors.layers[0];
  REQUIRE(l.experts.size() == 32);
  for (const TensorView* t : {&l.experts[3][ExpertTensor::kGate], &l.experts[3][ExpertTensor::kUp], &l.experts[31][ExpertTensor::kDown]}) {
    CHECK(t->dtype == DType::kMXFP4);
  }
  for (const TensorView* t : {&l[LayerTensor::kWq], &l[LayerTensor::kWo], &l[LayerTensor::kRouter], &model.tensors[ModelTensor::kLmHead]}) CHECK(t->dtype == DType::kF32);
  // The same seeds as the f32 model: only the experts' encoding differs.
  source.dummy_dtype = DType::kF32;
  const Model f32 = load_model(source);
  CHECK(l.experts[3][ExpertTensor::kGate].random.seed == f32.tensors.layers[0].experts[3][ExpertTensor::kGate].random.seed);
  CHECK(first_row(l[LayerTensor::kWq]) == first_row(f32.tensors.layers[0][LayerTensor::kWq]));
  CHECK(first_row(l.experts[3][ExpertTensor::kGate]) != first_row(f32.tensors.layers[0].experts[3][ExpertTensor::kGate]));

  // scale sqrt(3 / 2880) = 2^-4.95: e0 = 125 - 5, values 2^(e - 128) * {0, +-1, .., +-12}, e in {e0 - 1, e0}.
  const TensorView& gate = l.experts[3][ExpertTensor::kGate];
  const int e0 = random_mxfp4_exponent(gate.random.scale);
  CHECK(e0 == 120);
  const int64_t rows = 16, blocks = rows * gate.cols / 32;
  std::vector<float> values(static_cast<size_t>(rows * gate.cols));
  tensor_rows_to_f32(gate, 0, rows, values.data());
  double sum_sq = 0;
  float max_abs = 0;
  for (float v : values) {
    sum_sq += static_cast<double>(v) * v;
    max_abs = std::max(max_abs, std::fabs(v));
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(values.size()));
  const double f32_rms = gate.random.scale / std::sqrt(3.0);  // the uniform dummy's
  CHECK(rms == doctest::Approx(4.627 * std::ldexp(1.0, e0 - 128)).epsilon(0.03));
  CHECK(rms > f32_rms / std::sqrt(2.0));
  CHECK(rms < f32_rms * std::sqrt(2.0));
  CHECK(max_abs == std::ldexp(12.0f, e0 - 128));
  // The CUDA generator's shared function, block by block: the same blocks, both exponents and every code.
  std::set<int> exponents, codes;
  std::vector<uint8_t> block(17);
  std::vector<float> decoded(32);
  for (int64_t b = 0; b < blocks; ++b) {
    random_mxfp4_block(gate.random.seed, e0, static_cast<uint64_t>(b), block.data());
    decode_block<BlockFormat<DType::kMXFP4>>(block.data(), decoded.data());
    REQUIRE(std::equal(decoded.begin(), decoded.end(), values.begin() + b * 32));
    exponents.insert(block[0]);
    for (int e = 0; e < 32; ++e) codes.insert(BlockFormat<DType::kMXFP4>::code(block.data(), e));
  }
  CHECK(exponents == std::set<int>{e0 - 1, e0});
  CHECK(codes.size() == 16);
  // Rows from the middle of the tensor: block indices continue row after row.
  std::vector<float> row(static_cast<size_t>(gate.cols));
  tensor_rows_to_f32(gate, 5, 1, row.data());
  CHECK(std::equal(row.begin(), row.end(), values.begin() + 5 * gate.cols));
}

TEST_CASE("dummy model: --dummy-dtype mxfp4 refuses a model without experts, or experts not of whole blocks") {
  ModelSource dense{"dummy:" + test::source_path("examples/models/smollm2-135m.json"), "", 0};
  dense.dummy_dtype = DType::kMXFP4;
  std::string message = error_of([&] { load_model(dense); });
  CHECK(message.find("--dummy-dtype mxfp4") != std::string::npos);
  CHECK(message.find("no experts") != std::string::npos);
  std::string text = test::read_bytes(test::source_path("examples/models/gpt-oss-20b.json"));
  text.replace(text.find("\"intermediate_size\": 2880"), 25, "\"intermediate_size\": 2888");
  const TempFile file(text, ".json");
  ModelSource odd{"dummy:" + file.path(), "", 0};
  odd.dummy_layers = 1;
  odd.dummy_dtype = DType::kMXFP4;
  message = error_of([&] { load_model(odd); });
  CHECK(message.find("--dummy-dtype mxfp4") != std::string::npos);
  CHECK(message.find("2888") != std::string::npos);
  odd.dummy_dtype = DType::kF32;
  CHECK(load_model(odd).config.expert_hidden_dim == 2888);  // the shape itself is fine
}

TEST_CASE("dummy model: config errors name the file and the field") {
  const std::string good = test::read_bytes(test::source_path("examples/models/smollm2-135m.json"));
  SUBCASE("missing hidden_size") {
    std::string text = good;
    text.replace(text.find("\"hidden_size\""), 13, "\"hidden_sizeX\"");
    const TempFile file(text, ".json");
    const std::string message = error_of([&] { load_model(ModelSource{"dummy:" + file.path(), "", 0}); });
    CHECK(message.find("'hidden_size'") != std::string::npos);
    CHECK(message.find(file.path()) != std::string::npos);
  }
  SUBCASE("wrong type") {
    std::string text = good;
    text.replace(text.find("\"num_hidden_layers\": 30"), 23, "\"num_hidden_layers\": \"30\"");
    const TempFile file(text, ".json");
    CHECK(error_of([&] {
            load_model(ModelSource{"dummy:" + file.path(), "", 0});
          }).find("'num_hidden_layers'") != std::string::npos);
  }
  SUBCASE("heads that do not divide") {
    std::string text = good;
    text.replace(text.find("\"num_key_value_heads\": 3"), 24, "\"num_key_value_heads\": 4");
    const TempFile file(text, ".json");
    CHECK(error_of([&] {
            load_model(ModelSource{"dummy:" + file.path(), "", 0});
          }).find("num_kv_heads") != std::string::npos);
  }
  SUBCASE("invalid JSON and a missing file") {
    const TempFile file(good.substr(0, 100), ".json");
    CHECK(error_of([&] {
            load_model(ModelSource{"dummy:" + file.path(), "", 0});
          }).find(file.path()) != std::string::npos);
    CHECK(error_of([] {
            load_model(ModelSource{"dummy:/nonexistent/config.json", "", 0});
          }).find("/nonexistent/config.json") != std::string::npos);
  }
}

TEST_CASE("byte tokenizer: bytes round-trip, specials decode to nothing") {
  const Model model = load_dummy("smollm2-135m.json");
  const Tokenizer& tok = *model.tokenizer;
  const std::string text = "héllo\n🌟";
  const std::vector<int32_t> ids = tok.encode(text, true);
  REQUIRE(ids.size() == text.size() + 1);
  CHECK(ids[0] == 1);
  CHECK(ids[2] == 0xC3);
  CHECK(tok.decode(ids) == text);
  CHECK(tok.encode(text, false).size() == text.size());
  CHECK(tok.decode_piece(-1, 2).empty());    // EOS, although it collides with byte 0x02
  CHECK(tok.decode_piece(-1, 300).empty());  // ids above the bytes
  CHECK_THROWS_AS(tok.decode_piece(-1, 49152), Error);
}

TEST_CASE("byte tokenizer: BOS/EOS default to the last two ids") {
  std::string text = test::read_bytes(test::source_path("examples/models/smollm2-135m.json"));
  text.replace(text.find("\"bos_token_id\": 1"), 17, "\"bos_token_id\": null");
  text.replace(text.find("\"eos_token_id\": 2"), 17, "\"unused_field\": 2");
  const TempFile file(text, ".json");
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(ModelSource{"dummy:" + file.path(), "", 0});
  CHECK(tok->bos_id() == 49150);
  CHECK(tok->eos_ids() == std::vector<int32_t>{49151});
  CHECK(tok->decode_piece(-1, 2) == "\x02");
}

}  // namespace cbatch
