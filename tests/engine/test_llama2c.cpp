// llama2.c checkpoints: aidreams260K.bin must give the same fp32 tensors, bit for bit, as the GGUF that
// llama.cpp converted from it, and the same config except tied_embeddings (the .bin ties the
// classifier to the embedding, the GGUF stores a copy as output.weight). Wrong sizes are errors.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/model/model.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

const std::string& kBin = test::kAidreamsBin;
const std::string& kTok = test::kAidreamsTokenizerBin;
const std::string& kGguf = test::kAidreamsGguf;

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

TEST_CASE("llama2.c .bin and its GGUF conversion hold identical weights and configs") {
  if (!test::have_files({kBin, kTok, kGguf})) return;
  const Model bin = load_model(ModelSource{kBin, kTok, 0});
  const Model gguf = load_model(ModelSource{kGguf, "", 0});
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
  CHECK(a.tied_embeddings);
  CHECK(!b.tied_embeddings);
  CHECK(a.num_parameters() == 230976);  // the README's count (tied)

  check_identical(bin.tensors.embedding, gguf.tensors.embedding);
  check_identical(bin.tensors.final_norm, gguf.tensors.final_norm);
  check_identical(bin.tensors.lm_head, gguf.tensors.lm_head);
  CHECK(bin.tensors.lm_head.data == bin.tensors.embedding.data);
  for (int i = 0; i < a.num_layers; ++i) {
    const LayerTensors& x = bin.tensors.layers[i];
    const LayerTensors& y = gguf.tensors.layers[i];
    check_identical(x.attn_norm, y.attn_norm);
    check_identical(x.wq, y.wq);
    check_identical(x.wk, y.wk);
    check_identical(x.wv, y.wv);
    check_identical(x.wo, y.wo);
    check_identical(x.ffn_norm, y.ffn_norm);
    check_identical(x.w_gate, y.w_gate);
    check_identical(x.w_up, y.w_up);
    check_identical(x.w_down, y.w_down);
  }
}

TEST_CASE("llama2.c loader rejects wrong sizes, bad headers and a missing tokenizer") {
  if (!test::have_files({kBin, kTok})) return;
  const std::string original = test::read_bytes(kBin);
  for (const std::string& bytes :
       {original + "xxxx", original.substr(0, original.size() - 4), original.substr(0, 20)}) {
    const TempFile file(bytes);
    const std::string message = error_of([&] { load_model(ModelSource{file.path(), kTok, 0}); });
    CHECK(message.find(file.path()) != std::string::npos);
  }
  SUBCASE("size error says what the header needs") {
    const TempFile file(original + "xxxx");
    CHECK(error_of([&] {
            load_model(ModelSource{file.path(), kTok, 0});
          }).find("needs 932124 bytes") != std::string::npos);
  }
  SUBCASE("negative layer count") {
    std::string bytes = original;
    const int32_t layers = -4;
    std::memcpy(&bytes[8], &layers, 4);
    const TempFile file(bytes);
    CHECK(error_of([&] {
            load_model(ModelSource{file.path(), kTok, 0});
          }).find("num_layers") != std::string::npos);
  }
  SUBCASE("no tokenizer") {
    CHECK(error_of([&] { load_model(ModelSource{kBin, "", 0}); }).find("--tokenizer") != std::string::npos);
  }
  SUBCASE("a tokenizer with fewer tokens than the vocab") {
    const std::string tok = test::read_bytes(kTok);
    const TempFile file(tok.substr(0, tok.size() - 10));  // the last token: score, length 2, 2 bytes
    CHECK(error_of([&] {
            load_model(ModelSource{kBin, file.path(), 0});
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
