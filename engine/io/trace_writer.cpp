#include "engine/io/trace_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/base/error.hpp"
#include "engine/base/open_for_writing.hpp"
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
  w.key("prefix_hits").int64(r.prefix_hits);
  w.key("kv_blocks_cached").int64(r.kv_blocks_cached);
  w.key("kv_group_blocks").begin_array();
  for (int blocks : r.kv_group_blocks) w.int64(blocks);
  w.end_array();
  if (r.constrained_rows > 0) {
    w.key("constrained_rows").int64(r.constrained_rows);
    w.key("mask_ms").number(r.mask_ms, 3);
  }
  if (r.experts_touched >= 0) w.key("experts_touched").int64(r.experts_touched);
  if (r.state_slots_total > 0) {
    w.key("state_slots_used").int64(r.state_slots_used);
    w.key("state_slots_total").int64(r.state_slots_total);
    w.key("state_bytes").int64(r.state_bytes);
  }
  if (r.state_snapshots_total > 0) {
    w.key("state_snapshots_cached").int64(r.state_snapshots_cached);
    w.key("state_snapshots_total").int64(r.state_snapshots_total);
    w.key("state_snapshots_saved").int64(r.state_snapshots_saved);
    w.key("state_snapshots_restored").int64(r.state_snapshots_restored);
  }
  if (r.embedding_seqs > 0) {
    w.key("embedding_seqs").int64(r.embedding_seqs);
    w.key("embedding_tokens").int64(r.embedding_tokens);
  }
  w.end_object();
  return w.take() + "\n";
}

TraceWriter::TraceWriter(const std::string& path, const std::atomic<int>* stop) : path_(path) {
  const int fd = open_for_writing(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, stop);
  if (fd < 0 && errno == EINTR && stop != nullptr) return;  // stopped before a reader came: no steps to write
  if (fd >= 0) file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw Error("cannot open trace file '" + path + "': " + std::strerror(err));
  }
}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TraceWriter::write(const StepRecord& record) {
  if (file_ == nullptr) return;  // stopped before it opened: the run takes no step
  const std::string line = format_step_record(record);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) fail(errno);
}

void TraceWriter::close() {
  std::FILE* file = std::exchange(file_, nullptr);
  if (file == nullptr) return;
  const bool failed_before = std::ferror(file) != 0;
  if (std::fclose(file) != 0) fail(errno);  // the buffer's last write: a short run's whole trace
  if (failed_before) fail(EIO);
}

void TraceWriter::fail(int err) const {
  throw Error("cannot write trace file '" + path_ + "': " + std::strerror(err));
}

}  // namespace cbatch
