// The end-of-run summary: a few human lines for stderr, and the same numbers as JSON (--summary).
#pragma once
#include <string>

#include "engine/bench/run_stats.hpp"

namespace cbatch {

class JsonWriter;

std::string format_summary_text(const RunSummary& summary);
// The throughput and latency fields that the summary and every bench result share.
void write_throughput_fields(JsonWriter& w, const RunSummary& summary);

std::string format_summary_json(const RunSummary& summary, std::string_view mode, std::string_view device);

}  // namespace cbatch
