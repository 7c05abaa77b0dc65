#include "engine/io/embedding_format.hpp"

#include <charconv>
#include <cmath>

#include "engine/io/json_writer.hpp"

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

}  // namespace

std::string format_embedding_result(const RequestResult& r, const ResultFormatOptions& options) {
  JsonWriter w;
  w.begin_object();
  w.key("id").raw(r.request->id_json);
  write_floats(w.key("embedding"), r.embedding);
  w.key("prompt_tokens").int64(r.prompt_tokens);
  w.key("truncated_tokens").int64(r.request->embedding->truncated_tokens);
  w.key("metrics").begin_object();
  w.key("e2e_ms").number(r.e2e_ms, options.ms_decimals);
  w.key("first_step").int64(r.first_step);
  w.key("finish_step").int64(r.finish_step);
  w.end_object();
  w.end_object();
  return w.take() + "\n";
}

}  // namespace cbatch
