#include "engine/io/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace cbatch {

ProgressReporter::ProgressReporter(bool enabled) : enabled_(enabled), is_tty_(isatty(STDERR_FILENO) != 0) {}

void ProgressReporter::on_step(const StepRecord& r, int64_t total) {
  done_ += r.finished;
  tokens_ += r.sampled_tokens;
  if (!enabled_) return;
  const double interval_ms = is_tty_ ? 200 : 5000;
  if (r.t_ms - last_print_ms_ < interval_ms) return;
  last_print_ms_ = r.t_ms;
  const double tok_s = r.t_ms > 0 ? static_cast<double>(tokens_) / (r.t_ms * 1e-3) : 0;
  char total_text[32] = "?";
  if (total >= 0) std::snprintf(total_text, sizeof(total_text), "%lld", static_cast<long long>(total));
  std::fprintf(stderr, "%s[cbatch] %lld/%s requests | %.0f tok/s | KV %d/%d blocks | waiting %d | step %lld%s",
               is_tty_ ? "\r" : "", static_cast<long long>(done_), total_text, tok_s, r.kv_blocks_used,
               r.kv_blocks_total, r.waiting, static_cast<long long>(r.step), is_tty_ ? "\033[K" : "\n");
  printed_ = true;
}

void ProgressReporter::finish() {
  if (enabled_ && printed_ && is_tty_) std::fputc('\n', stderr);
}

}  // namespace cbatch
