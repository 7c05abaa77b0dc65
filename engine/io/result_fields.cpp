#include "engine/io/result_fields.hpp"

namespace cbatch {

void write_simple_metrics(JsonWriter& w, const RequestResult& r, const ResultFormatOptions& options) {
  w.key("metrics").begin_object();
  if (!r.request->embedding) w.key("ttft_ms").number(r.ttft_ms, options.ms_decimals);
  w.key("e2e_ms").number(r.e2e_ms, options.ms_decimals);
  w.key("first_step").int64(r.first_step);
  w.key("finish_step").int64(r.finish_step);
  w.end_object();
}

const std::string& result_model(const RequestResult& r, const ResultFormatOptions& options) {
  return r.request->lora_name.empty() ? options.model : r.request->lora_name;
}

}  // namespace cbatch
