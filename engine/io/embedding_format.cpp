#include "engine/io/embedding_format.hpp"

#include <charconv>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <numeric>

namespace cbatch {
namespace {

void write_floats(JsonWriter& w, const std::vector<float>& values) {
  w.begin_array();
  char buf[32];
  for (float v : values) {
    if (!std::isfinite(v)) {
      w.null();
      continue;
    }
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    w.raw(std::string_view(buf, static_cast<size_t>(end - buf)));
  }
  w.end_array();
}

// Standard base64 (with padding) of the values' little-endian float32 bytes.
std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xFF);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t j = 0; j < 3; ++j) chunk = chunk << 8 | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(chunk >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

int total_truncated(const RequestResult& r) {
  const std::vector<int>& t = r.request->embedding->truncated_tokens;
  return std::accumulate(t.begin(), t.end(), 0);
}

}  // namespace

std::string format_simple_embedding(const RequestResult& r, const ResultFormatOptions& options) {
  JsonWriter w;
  w.begin_object();
  w.key("id").raw(r.request->id_json);
  write_floats(w.key("embedding"), r.embeddings.empty() ? std::vector<float>{} : r.embeddings[0]);
  w.key("prompt_tokens").int64(r.prompt_tokens);
  w.key("truncated_tokens").int64(total_truncated(r));
  if (!r.request->lora_name.empty()) w.key("lora").string(r.request->lora_name);
  write_simple_metrics(w, r, options);
  w.end_object();
  return w.take() + "\n";
}

void write_embedding_body(JsonWriter& w, const RequestResult& r, const ResultFormatOptions& options) {
  w.begin_object();
  w.key("object").string("list");
  w.key("data").begin_array();
  for (size_t i = 0; i < r.embeddings.size(); ++i) {
    w.begin_object();
    w.key("object").string("embedding");
    w.key("index").int64(static_cast<int64_t>(i));
    if (r.request->embedding->base64) {
      w.key("embedding").string(base64_floats(r.embeddings[i]));
    } else {
      write_floats(w.key("embedding"), r.embeddings[i]);
    }
    w.end_object();
  }
  w.end_array();
  w.key("model").string(result_model(r, options));
  w.key("usage").begin_object();
  w.key("prompt_tokens").int64(r.prompt_tokens);
  w.key("total_tokens").int64(r.prompt_tokens);
  w.end_object();
  w.end_object();
}

}  // namespace cbatch
