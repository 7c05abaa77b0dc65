// llama2.c checkpoints: tiny-spm.bin (untied: a negative vocab_size in the header, wcls after the RoPE
// tables; 2 KV heads) must give the same fp32 tensors, bit for bit, and the same config as tiny-spm.gguf,
// which tools/tiny_spm/make_tiny_spm.py writes from the same arrays. Wrong sizes are errors.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/model/model.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

std::string bin_path() { return test::tiny_spm_path("tiny-spm.bin"); }
std::string tokenizer_path() { return test::tiny_spm_path("tokenizer.bin"); }
std::string gguf_path() { return test::tiny_spm_path("tiny-spm.gguf"); }

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  tensor_rows_to_f32(t, 0, t.rows, out.data());
  return out;
}

void check_identical(const TensorView& a, const TensorView& b) {
  INFO(a.name << " vs " << b.name);
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  const std::vector<float> x = to_f32(a), y = to_f32(b);
  CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("tiny-spm's llama2.c .bin and its GGUF hold identical weights and configs") {
  const std::string bin_file = bin_path(), tok_file = tokenizer_path(), gguf_file = gguf_path();
  const Model bin = load_model(ModelSource{bin_file, tok_file, 0});
  const Model gguf = load_model(ModelSource{gguf_file, "", 0});
  CHECK(bin.format == "llama2c");
  CHECK(bin.weight_dtype == "f32");
  CHECK(bin.tokenizer->kind() == "llama");

  const ModelConfig& a = bin.config;
  const ModelConfig& b = gguf.config;
  CHECK(a.dim == b.dim);
  CHECK(a.hidden_dim == b.hidden_dim);
  CHECK(a.num_layers == b.num_layers);
  CHECK(a.num_heads == b.num_heads);
  CHECK(a.num_kv_heads == b.num_kv_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.vocab_size == b.vocab_size);
  CHECK(a.max_context == b.max_context);
  CHECK(a.rms_eps == b.rms_eps);
  CHECK(a.rope_theta == b.rope_theta);
  CHECK(a.rope_layout == b.rope_layout);
  CHECK(a.num_kv_heads == 2);
  CHECK(a.vocab_size == 512);
  CHECK(!a.tied_embeddings);
  CHECK(!b.tied_embeddings);
  // Per layer 2 * 64 (norms) + 64 * 64 * 2 (wq, wo) + 64 * 32 * 2 (wk, wv) + 3 * 64 * 172 (ffn) = 45440;
  // 4 layers, the final norm (64), the embedding and the untied head (2 * 512 * 64).
  CHECK(a.num_parameters() == 4 * 45440 + 64 + 2 * 512 * 64);

  check_identical(bin.tensors[ModelTensor::kEmbedding], gguf.tensors[ModelTensor::kEmbedding]);
  check_identical(bin.tensors[ModelTensor::kFinalNorm], gguf.tensors[ModelTensor::kFinalNorm]);
  check_identical(bin.tensors[ModelTensor::kLmHead], gguf.tensors[ModelTensor::kLmHead]);
  CHECK(bin.tensors[ModelTensor::kLmHead].data != bin.tensors[ModelTensor::kEmbedding].data);  // wcls, not the embedding again
  for (int i = 0; i < a.num_layers; ++i) {
    const LayerTensors& x = bin.tensors.layers[i];
    const LayerTensors& y = gguf.tensors.layers[i];
    check_identical(x[LayerTensor::kAttnNorm], y[LayerTensor::kAttnNorm]);
    check_identical(x[LayerTensor::kWq], y[LayerTensor::kWq]);
    check_identical(x[LayerTensor::kWk], y[LayerTensor::kWk]);
    check_identical(x[LayerTensor::kWv], y[LayerTensor::kWv]);
    check_identical(x[LayerTensor::kWo], y[LayerTensor::kWo]);
    check_identical(x[LayerTensor::kFfnNorm], y[LayerTensor::kFfnNorm]);
    check_identical(x[LayerTensor::kGate], y[LayerTensor::kGate]);
    check_identical(x[LayerTensor::kUp], y[LayerTensor::kUp]);
    check_identical(x[LayerTensor::kDown], y[LayerTensor::kDown]);
  }
}

TEST_CASE("llama2.c loader rejects wrong sizes, bad headers and a missing tokenizer") {
  const std::string bin_file = bin_path(), tok_file = tokenizer_path();
  const std::string original = test::read_bytes(bin_file);
  for (const std::string& bytes :
       {original + "xxxx", original.substr(0, original.size() - 4), original.substr(0, 20)}) {
    const TempFile file(bytes);
    const std::string message = error_of([&] { load_model(ModelSource{file.path(), tok_file, 0}); });
    CHECK(message.find(file.path()) != std::string::npos);
  }
  SUBCASE("size error says what the header needs") {
    // 28 header bytes, then fp32: the 247360 parameters and the RoPE tables (2 * 128 * 16 / 2).
    const TempFile file(original + "xxxx");
    CHECK(error_of([&] {
            load_model(ModelSource{file.path(), tok_file, 0});
          }).find("needs " + std::to_string(28 + 4 * (247360 + 128 * 16)) + " bytes") != std::string::npos);
  }
  SUBCASE("negative layer count") {
    std::string bytes = original;
    const int32_t layers = -4;
    std::memcpy(&bytes[8], &layers, 4);
    const TempFile file(bytes);
    CHECK(error_of([&] {
            load_model(ModelSource{file.path(), tok_file, 0});
          }).find("num_layers") != std::string::npos);
  }
  SUBCASE("no tokenizer") {
    CHECK(error_of([&] { load_model(ModelSource{bin_file, "", 0}); }).find("--tokenizer") != std::string::npos);
  }
  SUBCASE("a tokenizer with fewer tokens than the vocab") {
    // tokenizer.bin: int32 max length, then per token float32 score, int32 length, its bytes. The cut
    // leaves token 511 its score but not its length.
    const std::string tok = test::read_bytes(tok_file);
    size_t last = 4;
    for (int token = 0; token < 511; ++token) {
      int32_t length;
      std::memcpy(&length, &tok[last + 4], 4);
      last += 8 + static_cast<size_t>(length);
    }
    REQUIRE(last < tok.size());
    const TempFile file(tok.substr(0, last + 4));
    CHECK(error_of([&] {
            load_model(ModelSource{bin_file, file.path(), 0});
          }).find("token 511 is truncated") != std::string::npos);
  }
}

TEST_CASE("load_model names a missing file; a directory without config.json is no Hugging Face model") {
  CHECK(error_of([] {
          load_model(ModelSource{"/nonexistent/model.gguf", "", 0});
        }).find("/nonexistent/model.gguf") != std::string::npos);
  CHECK(error_of([] {
          load_model(ModelSource{CBATCH_SOURCE_DIR, "", 0});
        }).find("needs config.json") != std::string::npos);
}

}  // namespace cbatch
