// Hugging Face directories: tiny-spm's hf/ holds the GGUF's function (q/k rows permuted for
// rotate-half RoPE, everything else bit-identical), sharded safetensors with an index load the same
// tensors, F16/BF16 tensors decode, and missing or malformed files give errors naming file and field.
#include <doctest/doctest.h>

#include <cstring>
#include <map>

#include "engine/model/model.hpp"
#include "engine/model/safetensors.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempDir;

std::string hf_dir() { return test::tiny_spm_path("hf"); }

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  tensor_rows_to_f32(t, 0, t.rows, out.data());
  return out;
}

bool identical(const TensorView& a, const TensorView& b) {
  return a.rows == b.rows && a.cols == b.cols && to_f32(a) == to_f32(b);
}

// HF row (head, r, i) of q/k is the GGUF (adjacent pairs) row (head, 2i + r).
bool is_rotate_half_permutation(const TensorView& hf, const TensorView& gguf, int head_dim) {
  if (hf.rows != gguf.rows || hf.cols != gguf.cols) return false;
  const std::vector<float> a = to_f32(hf), b = to_f32(gguf);
  const int64_t cols = hf.cols, half = head_dim / 2;
  for (int64_t row = 0; row < hf.rows; ++row) {
    const int64_t head = row / head_dim, r = (row % head_dim) / half, i = row % half;
    const int64_t from = head * head_dim + 2 * i + r;
    if (std::memcmp(&a[row * cols], &b[from * cols], cols * sizeof(float)) != 0) return false;
  }
  return true;
}

struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string safetensors_bytes(const std::vector<StTensor>& tensors) {
  std::string header = "{\"__metadata__\": {\"format\": \"pt\"}";
  std::string data;
  for (const StTensor& t : tensors) {
    std::string shape;
    for (int64_t d : t.shape) {
      if (!shape.empty()) shape += ",";
      shape += std::to_string(d);
    }
    header += ", \"" + t.name + "\": {\"dtype\": \"" + t.dtype + "\", \"shape\": [" + shape + "], \"data_offsets\": [" +
              std::to_string(data.size()) + ", " + std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  const uint64_t length = header.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + header + data;
}

std::string raw_bytes(const TensorView& t) {
  return std::string(static_cast<const char*>(t.data), static_cast<size_t>(t.numel() * 4));
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("tiny-spm's Hugging Face directory holds the GGUF's weights") {
  const Model hf = load_model(ModelSource{hf_dir(), "", 0});
  const Model gguf = load_model(ModelSource{test::tiny_spm_path("tiny-spm.gguf"), "", 0});
  CHECK(hf.format == "hf");
  CHECK(hf.weight_dtype == "f32");
  CHECK(hf.config.rope_layout == RopeLayout::kHalves);
  CHECK(!hf.config.tied_embeddings);  // "tie_word_embeddings": false, lm_head.weight is stored
  CHECK(hf.config.dim == gguf.config.dim);
  CHECK(hf.config.hidden_dim == gguf.config.hidden_dim);
  CHECK(hf.config.num_layers == gguf.config.num_layers);
  CHECK(hf.config.num_heads == gguf.config.num_heads);
  CHECK(hf.config.num_kv_heads == 2);
  CHECK(hf.config.head_dim == 16);
  CHECK(hf.config.vocab_size == gguf.config.vocab_size);
  CHECK(hf.config.max_context == gguf.config.max_context);
  CHECK(hf.config.rms_eps == gguf.config.rms_eps);
  CHECK(hf.config.rope_theta == gguf.config.rope_theta);
  CHECK(identical(hf.tensors[ModelTensor::kEmbedding], gguf.tensors[ModelTensor::kEmbedding]));
  CHECK(identical(hf.tensors[ModelTensor::kFinalNorm], gguf.tensors[ModelTensor::kFinalNorm]));
  CHECK(identical(hf.tensors[ModelTensor::kLmHead], gguf.tensors[ModelTensor::kLmHead]));
  CHECK(!identical(hf.tensors[ModelTensor::kLmHead], hf.tensors[ModelTensor::kEmbedding]));
  for (size_t i = 0; i < hf.tensors.layers.size(); ++i) {
    const LayerTensors& a = hf.tensors.layers[i];
    const LayerTensors& b = gguf.tensors.layers[i];
    CHECK(is_rotate_half_permutation(a[LayerTensor::kWq], b[LayerTensor::kWq], hf.config.head_dim));
    CHECK(is_rotate_half_permutation(a[LayerTensor::kWk], b[LayerTensor::kWk], hf.config.head_dim));
    CHECK(identical(a[LayerTensor::kWv], b[LayerTensor::kWv]));
    CHECK(identical(a[LayerTensor::kWo], b[LayerTensor::kWo]));
    CHECK(identical(a[LayerTensor::kGate], b[LayerTensor::kGate]));
    CHECK(identical(a[LayerTensor::kUp], b[LayerTensor::kUp]));
    CHECK(identical(a[LayerTensor::kDown], b[LayerTensor::kDown]));
    CHECK(identical(a[LayerTensor::kAttnNorm], b[LayerTensor::kAttnNorm]));
    CHECK(identical(a[LayerTensor::kFfnNorm], b[LayerTensor::kFfnNorm]));
  }
  CHECK(hf.tokenizer->kind() == "llama");
  CHECK(hf.tokenizer->bos_id() == 1);
  CHECK(hf.tokenizer->is_eos(2));
  CHECK(hf.tokenizer->encode("I dreamed of", true) == gguf.tokenizer->encode("I dreamed of", true));
  CHECK(hf.tokenizer->encode("Z\xC3\xBCrich, r\xC3\xA9sum\xC3\xA9", true) ==
        gguf.tokenizer->encode("Z\xC3\xBCrich, r\xC3\xA9sum\xC3\xA9", true));
}

TEST_CASE("sharded safetensors with an index load the same tensors") {
  const std::string hf = hf_dir();
  const Model single = load_model(ModelSource{hf, "", 0});
  const SafetensorsFile file(hf + "/model.safetensors");
  std::vector<StTensor> shards[2];
  std::map<std::string, int> shard_of;
  int index = 0;
  for (const auto& [name, tensor] : file.tensors()) {
    shard_of[name] = index++ % 2;
    shards[shard_of[name]].push_back({name, tensor.dtype, tensor.shape, raw_bytes(file.view(name))});
  }
  const auto index_json = [&](const std::string& moved) {  // `moved` is listed in the wrong shard
    std::string map;
    for (const auto& [name, shard] : shard_of) {
      const int listed = name == moved ? 1 - shard : shard;
      map += std::string(map.empty() ? "" : ", ") + "\"" + name + "\": \"model-0000" + std::to_string(listed + 1) +
             "-of-00002.safetensors\"";
    }
    return "{\"metadata\": {}, \"weight_map\": {" + map + "}}";
  };
  TempDir dir(hf);
  std::filesystem::remove(dir.file("model.safetensors"));
  dir.write("model-00001-of-00002.safetensors", safetensors_bytes(shards[0]));
  dir.write("model-00002-of-00002.safetensors", safetensors_bytes(shards[1]));
  dir.write("model.safetensors.index.json", index_json(""));
  const Model sharded = load_model(ModelSource{dir.path(), "", 0});
  CHECK(identical(sharded.tensors[ModelTensor::kEmbedding], single.tensors[ModelTensor::kEmbedding]));
  CHECK(identical(sharded.tensors.layers[3][LayerTensor::kDown], single.tensors.layers[3][LayerTensor::kDown]));
  CHECK(identical(sharded.tensors.layers[0][LayerTensor::kWq], single.tensors.layers[0][LayerTensor::kWq]));
  CHECK(identical(sharded.tensors[ModelTensor::kLmHead], single.tensors[ModelTensor::kLmHead]));

  // The index must not point at a shard that lacks the tensor.
  dir.write("model.safetensors.index.json", index_json("model.norm.weight"));
  const std::string message = error_of([&] { load_model(ModelSource{dir.path(), "", 0}); });
  CHECK(message.find("model.norm.weight") != std::string::npos);
  CHECK(message.find("model.safetensors.index.json") != std::string::npos);
}

TEST_CASE("safetensors F16 and BF16 tensors decode; corrupt headers are errors") {
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x3800, 0x0000};  // 1, -2, 0.5, 0
  const uint16_t bf16[4] = {0x3F80, 0xC000, 0x3F00, 0x4049};  // 1, -2, 0.5, 3.140625
  test::TempFile file(safetensors_bytes({{"a", "F16", {2, 2}, std::string(reinterpret_cast<const char*>(f16), 8)},
                                         {"b", "BF16", {4}, std::string(reinterpret_cast<const char*>(bf16), 8)},
                                         {"c", "I64", {1}, std::string(8, '\0')}}),
                      ".safetensors");
  const SafetensorsFile st(file.path());
  CHECK(to_f32(st.view("a")) == std::vector<float>{1.0f, -2.0f, 0.5f, 0.0f});
  CHECK(st.view("a").rows == 2);
  CHECK(to_f32(st.view("b")) == std::vector<float>{1.0f, -2.0f, 0.5f, 3.140625f});
  CHECK(st.view("b").rows == 1);
  CHECK(error_of([&] { st.view("c"); }).find("I64") != std::string::npos);
  CHECK(error_of([&] { st.view("d"); }).find("'d'") != std::string::npos);

  const auto with_header = [](const std::string& header) {  // 8 data bytes after the given header
    const uint64_t length = header.size();
    return std::string(reinterpret_cast<const char*>(&length), 8) + header + std::string(8, '\0');
  };
  const std::string good = with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})");
  for (const auto& entry : std::vector<std::pair<std::string, std::string>>{
           {good.substr(0, good.size() - 1), "'a'"},  // truncated data
           {with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})"), "'a'"},
           {with_header(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})"), "'a'"},
           {with_header(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})"), "'a'"},
           {with_header(R"({"a": {"dtipe": "F32", "shape": [2], "data_offsets": [0, 8]}})"), "'a'"},
           {with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})"), "'a'"},
           {with_header(R"([1, 2])"), "JSON object"},
           {std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "header length"},
           {good.substr(0, 5), "8-byte"},
       }) {
    const std::string& bytes = entry.first;
    const std::string& needle = entry.second;  // a plain reference: doctest's INFO captures it in a lambda
    test::TempFile bad(bytes, ".safetensors");
    const std::string message = error_of([&] { SafetensorsFile f(bad.path()); });
    INFO(needle);
    CHECK_MESSAGE(message.find(needle) != std::string::npos, message);
    CHECK(message.find(bad.path()) != std::string::npos);
  }
}

TEST_CASE("a Hugging Face directory with missing or malformed files names the file and the field") {
  const std::string hf = hf_dir();
  const auto load_error = [](const TempDir& dir) { return error_of([&] { load_model(ModelSource{dir.path(), "", 0}); }); };
  {
    TempDir dir(hf);
    std::filesystem::remove(dir.file("config.json"));
    CHECK(load_error(dir).find("config.json") != std::string::npos);
  }
  {
    TempDir dir(hf);
    std::filesystem::remove(dir.file("tokenizer.json"));
    CHECK(load_error(dir).find("tokenizer.json") != std::string::npos);
  }
  {
    TempDir dir(hf);
    std::filesystem::remove(dir.file("model.safetensors"));
    CHECK(load_error(dir).find("model.safetensors") != std::string::npos);
  }
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> edits = {
      {"config.json", "\"hidden_size\": 64", "\"hidden_size\": \"64\"", "'hidden_size'"},
      {"config.json", "\"rope_theta\"", "\"rope_scaling\": {\"rope_type\": \"dynamic\"}, \"rope_theta\"",
       "rope_scaling.rope_type"},
      {"tokenizer.json", "\"type\": \"Prepend\"", "\"type\": \"NFKC\"", "normalizer.normalizers[0].type"},
      {"tokenizer.json", "\"type\": \"BPE\"", "\"type\": \"WordLevel\"", "model.type"},
      {"tokenizer_config.json", "\"eos_token\": \"</s>\"", "\"eos_token\": \"<end>\"", "eos_token"},
      {"tokenizer_config.json", "\"add_bos_token\": true", "\"add_bos_token\": 1", "add_bos_token"},
      {"generation_config.json", "\"eos_token_id\": 2", "\"eos_token_id\": \"2\"", "eos_token_id"},
      {"tokenizer.json", "\"version\"", "\"version", "tokenizer.json"},
  };
  for (const auto& [file, from, to, needle] : edits) {
    TempDir dir(hf);
    dir.write(file, replace(dir.read(file), from, to));
    const std::string message = load_error(dir);
    CHECK_MESSAGE(message.find(needle) != std::string::npos, message);
    CHECK_MESSAGE(message.find(file) != std::string::npos, message);
  }
}

}  // namespace cbatch
