// The GGUF reader: every metadata value type and tensor views on a hand-built file, tiny-spm.gguf
// (metadata and config, as tools/tiny_spm/make_tiny_spm.py writes them), and corrupt copies (cut headers,
// huge lengths and counts, tensors past the end, unsupported types, a tensor type whose size disagrees with
// the spacing of the tensors or whose rows are not whole blocks, random byte flips) that must give
// cbatch::Error, not a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/model/gguf.hpp"
#include "engine/model/model.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

// Appends little-endian GGUF fields to a byte string.
struct GgufWriter {
  std::string bytes;
  template <typename T>
  void put(T value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes += s;
  }
  void key(const std::string& k, GgufType type) {
    str(k);
    put<uint32_t>(static_cast<uint32_t>(type));
  }
  template <typename T>
  void kv(const std::string& k, GgufType type, T value) {
    key(k, type);
    put<T>(value);
  }
  void array_header(const std::string& k, GgufType element_type, uint64_t count) {
    key(k, GgufType::kArray);
    put<uint32_t>(static_cast<uint32_t>(element_type));
    put<uint64_t>(count);
  }
  template <typename T>
  void array(const std::string& k, GgufType element_type, std::initializer_list<T> items) {
    array_header(k, element_type, items.size());
    for (T item : items) put<T>(item);
  }
  void tensor_info(const std::string& name, std::initializer_list<uint64_t> dims, uint32_t type,
                   uint64_t offset) {
    str(name);
    put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(d);
    put<uint32_t>(type);
    put<uint64_t>(offset);
  }
  void pad_to(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, '\0');
  }
};

// A file with one key of every type, arrays (strings, ints, floats, bools, nested), alignment 64,
// an F16 tensor (2, 3) and a Q8_0 tensor (1, 32).
std::string build_test_gguf() {
  GgufWriter w;
  w.bytes = "GGUF";
  w.put<uint32_t>(3);
  w.put<uint64_t>(2);   // tensors
  w.put<uint64_t>(19);  // kvs
  w.kv<uint8_t>("u8", GgufType::kUint8, 200);
  w.kv<int8_t>("i8", GgufType::kInt8, -100);
  w.kv<uint16_t>("u16", GgufType::kUint16, 60000);
  w.kv<int16_t>("i16", GgufType::kInt16, -30000);
  w.kv<uint32_t>("u32", GgufType::kUint32, 4000000000u);
  w.kv<int32_t>("i32", GgufType::kInt32, -2000000000);
  w.kv<float>("f32", GgufType::kFloat32, 0.25f);
  w.kv<uint8_t>("bool", GgufType::kBool, 1);
  w.key("str", GgufType::kString);
  w.str("héllo");
  w.kv<uint64_t>("u64", GgufType::kUint64, 1ull << 40);
  w.kv<int64_t>("i64", GgufType::kInt64, -(1ll << 40));
  w.kv<double>("f64", GgufType::kFloat64, -1.5);
  w.kv<uint32_t>("general.alignment", GgufType::kUint32, 64);
  w.array_header("strs", GgufType::kString, 3);
  for (const char* s : {"a", "", "▁c"}) w.str(s);
  w.array<int32_t>("ints", GgufType::kInt32, {-7, 9});
  w.array<float>("floats", GgufType::kFloat32, {0.5f, -2.0f});
  w.array<uint8_t>("bools", GgufType::kBool, {0, 1});
  w.array_header("nested", GgufType::kArray, 1);
  w.put<uint32_t>(static_cast<uint32_t>(GgufType::kUint32));
  w.put<uint64_t>(2);
  w.put<uint32_t>(1);
  w.put<uint32_t>(2);
  w.array_header("empty", GgufType::kFloat32, 0);
  w.tensor_info("half", {3, 2}, 1, 0);  // F16
  w.tensor_info("q8", {32}, 8, 64);     // Q8_0
  w.pad_to(64);
  for (uint16_t h : {0x3C00, 0xC000, 0x3800, 0x0000, 0x4200, 0xB400}) w.put<uint16_t>(h);  // 1 -2 .5 0 3 -.25
  w.pad_to(64);
  w.put<uint16_t>(0x3800);  // Q8_0 scale 0.5
  for (int i = 0; i < 32; ++i) w.put<int8_t>(static_cast<int8_t>(i - 16));
  return w.bytes;
}

std::string tiny_spm_gguf() { return test::tiny_spm_path("tiny-spm.gguf"); }

void put_u64(std::string& bytes, size_t offset, uint64_t value) { std::memcpy(&bytes[offset], &value, 8); }
void put_u32(std::string& bytes, size_t offset, uint32_t value) { std::memcpy(&bytes[offset], &value, 4); }

// Byte offset of the ggml type field of tensor `name` in a GGUF header.
size_t tensor_type_offset(const std::string& bytes, const std::string& name) {
  const size_t at = bytes.find(name + std::string("\x02\x00\x00\x00", 4));
  REQUIRE(at != std::string::npos);
  return at + name.size() + 4 + 2 * 8;  // name, n_dims, two dims
}

}  // namespace

TEST_CASE("GGUF reader reads every metadata type and tensor views") {
  const TempFile file(build_test_gguf(), ".gguf");
  const GgufFile g(file.path());
  CHECK(g.version() == 3);
  CHECK(g.alignment() == 64);
  CHECK(g.data_offset() % 64 == 0);
  CHECK(g.get_int("u8") == 200);
  CHECK(g.get_int("i8") == -100);
  CHECK(g.get_int("u16") == 60000);
  CHECK(g.get_int("i16") == -30000);
  CHECK(g.get_int("u32") == 4000000000ll);
  CHECK(g.get_int("i32") == -2000000000);
  CHECK(g.get_int("u64") == (1ll << 40));
  CHECK(g.get_int("i64") == -(1ll << 40));
  CHECK(g.get_float("f32", 0) == 0.25);
  CHECK(g.get_float("f64", 0) == -1.5);
  CHECK(g.get_float("u8", 0) == 200.0);  // integers are numbers too
  CHECK(g.get_bool("bool", false));
  CHECK(g.get_string("str") == "héllo");
  CHECK(g.get_strings("strs") == std::vector<std::string>{"a", "", "▁c"});
  CHECK(g.get_ints("ints") == std::vector<int64_t>{-7, 9});
  CHECK(g.get_floats("floats") == std::vector<double>{0.5, -2.0});
  CHECK(g.get_ints("bools") == std::vector<int64_t>{0, 1});
  CHECK(g.find("nested")->array_size == 1);
  CHECK(g.get_floats("empty").empty());
  CHECK(g.get_int("missing", 7) == 7);
  CHECK(error_of([&] { g.get_int("str"); }).find("'str' is not an integer") != std::string::npos);
  CHECK(error_of([&] { g.get_string("nope"); }).find("'nope' is missing") != std::string::npos);
  CHECK_THROWS_AS(g.get_strings("ints"), Error);

  REQUIRE(g.tensors().size() == 2);
  const TensorView half = g.tensor_view(*g.find_tensor("half"));
  CHECK(half.rows == 2);  // ne = [3, 2]: 2 rows of 3
  CHECK(half.cols == 3);
  CHECK(half.dtype == DType::kF16);
  float values[6];
  tensor_rows_to_f32(half, 0, 2, values);
  CHECK(std::vector<float>(values, values + 6) == std::vector<float>{1, -2, 0.5f, 0, 3, -0.25f});
  const TensorView q8 = g.tensor_view(*g.find_tensor("q8"));
  CHECK(q8.dtype == DType::kQ8_0);
  float q[32];
  tensor_rows_to_f32(q8, 0, 1, q);
  CHECK(q[0] == -8.0f);
  CHECK(q[31] == 7.5f);
  CHECK(g.find_tensor("absent") == nullptr);
}

TEST_CASE("GGUF reader reads tiny-spm.gguf") {
  const std::string path = tiny_spm_gguf();
  const GgufFile g(path);
  CHECK(g.version() == 3);
  CHECK(g.tensors().size() == 39);  // 4 layers * 9 + token_embd, output_norm, output
  CHECK(g.get_string("general.architecture") == "llama");
  CHECK(g.get_string("general.name") == "tiny-spm");
  CHECK(g.get_int("llama.context_length") == 128);
  CHECK(g.get_int("llama.attention.head_count_kv") == 2);
  // The vocabulary: <unk> <s> </s>, the 256 byte pieces, then 253 pieces scored 0, -1, ... by merge order.
  const std::vector<std::string> tokens = g.get_strings("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 512);
  CHECK(tokens[0] == "<unk>");
  CHECK(tokens[1] == "<s>");
  CHECK(tokens[2] == "</s>");
  CHECK(tokens[3] == "<0x00>");
  CHECK(tokens[258] == "<0xFF>");
  CHECK(std::count(tokens.begin() + 259, tokens.end(), "\xE2\x96\x81") == 1);  // "▁" is a piece
  const std::vector<double> scores = g.get_floats("tokenizer.ggml.scores");
  REQUIRE(scores.size() == 512);
  CHECK(scores[258] == 0.0);
  CHECK(scores[260] == -1.0);
  CHECK(scores[511] == -252.0);
  const std::vector<int64_t> types = g.get_ints("tokenizer.ggml.token_type");
  REQUIRE(types.size() == 512);
  CHECK(types[0] == 2);    // unknown
  CHECK(types[1] == 3);    // control
  CHECK(types[258] == 6);  // byte
  CHECK(types[259] == 1);  // normal
  CHECK(g.get_int("tokenizer.ggml.eos_token_id") == 2);
  const GgufTensorInfo* down = g.find_tensor("blk.0.ffn_down.weight");
  REQUIRE(down != nullptr);
  CHECK(down->dims == std::vector<int64_t>{172, 64});
  CHECK(down->rows() == 64);
  CHECK(down->cols() == 172);

  const Model model = load_model(ModelSource{path, "", 0});
  const ModelConfig& c = model.config;
  CHECK(model.format == "gguf");
  CHECK(model.weight_dtype == "f32");
  CHECK(c.dim == 64);
  CHECK(c.hidden_dim == 172);
  CHECK(c.num_layers == 4);
  CHECK(c.num_heads == 4);
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.vocab_size == 512);
  CHECK(c.max_context == 128);
  CHECK(c.rms_eps == 1e-5f);
  CHECK(c.rope_theta == 10000.0f);
  CHECK(c.rope_layout == RopeLayout::kAdjacentPairs);
  CHECK(c.rope_scaling.type == RopeScalingType::kNone);
  CHECK(!c.tied_embeddings);  // tiny-spm's head (wcls) is its own tensor, output.weight
  CHECK(model.tensors[ModelTensor::kLmHead].name == "output.weight");
  CHECK(model.tokenizer->kind() == "llama");
  CHECK(model.tokenizer->bos_id() == 1);
  CHECK(model.tokenizer->is_eos(2));
}

TEST_CASE("GGUF reader rejects truncated and corrupt files with cbatch::Error") {
  const std::string path = tiny_spm_gguf();
  const std::string original = test::read_bytes(path);
  const uint64_t data_offset = GgufFile(path).data_offset();
  // Cuts in the magic, the version, the counts, the first keys, the token list, the tensor infos, the
  // padding before the data, the data.
  const size_t in_tokens = original.find("tokenizer.ggml.scores") - 100;
  const size_t in_tensor_infos = original.find("blk.2.attn_q.weight") + 5;
  for (size_t cut : {size_t{0}, size_t{3}, size_t{4}, size_t{7}, size_t{12}, size_t{23}, size_t{30},
                     size_t{100}, in_tokens, in_tensor_infos, size_t{data_offset - 1},
                     size_t{data_offset + 100}, original.size() - 1}) {
    INFO("cut at " << cut);
    const TempFile file(original.substr(0, cut), ".gguf");
    const std::string message = error_of([&] { GgufFile g(file.path()); });
    CHECK(message.find(file.path()) != std::string::npos);
    CHECK_THROWS_AS(load_model(ModelSource{file.path(), "", 0}), Error);
  }
  SUBCASE("huge key length") {
    std::string bytes = original;
    put_u64(bytes, 24, ~uint64_t{0} - 5);  // the first key's length
    const TempFile file(bytes, ".gguf");
    CHECK(error_of([&] { GgufFile g(file.path()); }).find("metadata key 0") != std::string::npos);
  }
  SUBCASE("huge array count is capped by the file size") {
    std::string bytes = original;
    // The key's text, then u32 type (array), u32 element type (string), u64 count.
    const size_t key = bytes.find("tokenizer.ggml.tokens");
    REQUIRE(key != std::string::npos);
    put_u64(bytes, key + 21 + 4 + 4, uint64_t{1} << 40);
    const TempFile file(bytes, ".gguf");
    CHECK(error_of([&] { GgufFile g(file.path()); }).find("larger than the file allows") !=
          std::string::npos);
  }
  SUBCASE("tensor offset beyond the file") {
    std::string bytes = original;
    put_u64(bytes, tensor_type_offset(bytes, "token_embd.weight") + 4, uint64_t{1} << 40);
    const TempFile file(bytes, ".gguf");
    CHECK(error_of([&] { GgufFile g(file.path()); }).find("'token_embd.weight'") != std::string::npos);
  }
  SUBCASE("unsupported tensor type names the tensor and the type") {
    std::string bytes = original;
    put_u32(bytes, tensor_type_offset(bytes, "blk.0.attn_q.weight"), 16);  // IQ2_XXS
    const TempFile file(bytes, ".gguf");
    const std::string message = error_of([&] { load_model(ModelSource{file.path(), "", 0}); });
    CHECK(message.find("'blk.0.attn_q.weight'") != std::string::npos);
    CHECK(message.find("IQ2_XXS") != std::string::npos);
    CHECK(message.find("Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4") != std::string::npos);
  }
  SUBCASE("an MXFP4 tensor whose size disagrees with its shape, or whose rows are not whole blocks, is named") {
    std::string bytes = original;
    put_u32(bytes, tensor_type_offset(bytes, "blk.0.attn_q.weight"), 39);  // 64 x 64: 2176 bytes, not 16384
    TempFile file(bytes, ".gguf");
    std::string message = error_of([&] { load_model(ModelSource{file.path(), "", 0}); });
    CHECK(message.find("'blk.0.attn_q.weight' (offset") != std::string::npos);
    CHECK(message.find("64 x 64 mxfp4: 2176 bytes) has 16384 bytes before the next tensor") != std::string::npos);
    bytes = original;
    put_u32(bytes, tensor_type_offset(bytes, "blk.1.ffn_down.weight"), 39);  // rows of 172
    file.write(bytes);
    message = error_of([&] { load_model(ModelSource{file.path(), "", 0}); });
    CHECK(message.find("'blk.1.ffn_down.weight' has 172 columns, not a multiple of the mxfp4 block size") !=
          std::string::npos);
  }
  SUBCASE("missing tensor is named") {
    std::string bytes = original;
    const size_t at = bytes.find("blk.3.ffn_up.weight");
    bytes[at + 4] = 'X';
    const TempFile file(bytes, ".gguf");
    CHECK(error_of([&] {
            load_model(ModelSource{file.path(), "", 0});
          }).find("'blk.3.ffn_up.weight' is missing") != std::string::npos);
  }
}

TEST_CASE("GGUF reader survives random byte flips in the header") {
  const std::string path = tiny_spm_gguf();
  const std::string original = test::read_bytes(path);
  const size_t header_bytes = GgufFile(path).data_offset();
  std::mt19937 rng(1234);
  TempFile file(original, ".gguf");
  int num_errors = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::string bytes = original;
    for (int flips = 0; flips < 3; ++flips) bytes[rng() % header_bytes] = static_cast<char>(rng());
    file.write(bytes);
    try {
      const Model model = load_model(ModelSource{file.path(), "", 0});
      model.tokenizer->encode("I dreamed of a quiet city", true);
    } catch (const Error&) {
      ++num_errors;  // any other exception type or a crash fails the test
    }
  }
  CHECK(num_errors > 0);
}

}  // namespace cbatch
