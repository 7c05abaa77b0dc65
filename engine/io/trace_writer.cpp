#include "engine/io/trace_writer.hpp"

#include <cerrno>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/io/json_writer.hpp"

namespace cbatch {

std::string format_step_record(const StepRecord& r) {
  JsonWriter w;
  w.begin_object();
  w.key("step").int64(r.step);
  w.key("t_ms").number(r.t_ms, 3);
  w.key("step_ms").number(r.step_ms, 3);
  w.key("mode").string(r.mode);
  w.key("num_seqs").int64(r.num_seqs);
  w.key("prefill_seqs").int64(r.prefill_seqs);
  w.key("decode_seqs").int64(r.decode_seqs);
  w.key("prefill_tokens").int64(r.prefill_tokens);
  w.key("decode_tokens").int64(r.decode_tokens);
  w.key("padding_tokens").int64(r.padding_tokens);
  w.key("token_budget").int64(r.token_budget);
  w.key("kv_blocks_used").int64(r.kv_blocks_used);
  w.key("kv_blocks_total").int64(r.kv_blocks_total);
  w.key("waiting").int64(r.waiting);
  w.key("finished").int64(r.finished);
  w.key("preempted").int64(r.preempted);
  w.key("cached_tokens").int64(r.cached_tokens);
  w.key("kv_blocks_cached").int64(r.kv_blocks_cached);
  if (r.constrained_rows > 0) {
    w.key("constrained_rows").int64(r.constrained_rows);
    w.key("mask_ms").number(r.mask_ms, 3);
  }
  if (r.experts_touched >= 0) w.key("experts_touched").int64(r.experts_touched);
  if (r.embedding_seqs > 0) {
    w.key("embedding_seqs").int64(r.embedding_seqs);
    w.key("embedding_tokens").int64(r.embedding_tokens);
  }
  w.end_object();
  return w.take() + "\n";
}

TraceWriter::TraceWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) throw Error("cannot open trace file '" + path + "': " + std::strerror(errno));
}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TraceWriter::write(const StepRecord& record) {
  const std::string line = format_step_record(record);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    throw Error("cannot write trace file '" + path_ + "': " + std::strerror(errno));
  }
}

}  // namespace cbatch
