// One pass over each shard file: every line parsed once for its key (and, for results, tokens and
// latencies); problems are gathered per file and reported as one message per kind.
#include "engine/scale/shard_scan.hpp"

#include <simdjson.h>

#include <algorithm>

#include "engine/io/jsonl_reader.hpp"
#include "engine/io/output_line_key.hpp"

namespace cbatch {

std::string list_lines(const std::vector<int64_t>& lines) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < lines.size() && i < kShown; ++i) text += (i > 0 ? ", " : "") + std::to_string(lines[i]);
  if (lines.size() > kShown) text += " and " + std::to_string(lines.size() - kShown) + " more";
  return text;
}

// What one file got wrong, each kind listed once at the end of its scan.
struct ShardScanner::FileProblems {
  std::vector<int64_t> not_output;     // file lines that are not cbatch output lines
  std::vector<int64_t> foreign;        // input lines that belong to another shard
  std::vector<int64_t> no_such_line;   // error lines naming a blank line or one past the input's end
  std::vector<std::string> unknown_ids;  // result ids no input line (of the shard) claims
  int64_t torn_line = 0;               // file line of a torn last line, 0 when none
};

namespace {

int64_t int_at(simdjson::dom::element e, std::string_view pointer) {
  int64_t v = 0;
  return e.at_pointer(pointer).get_int64().get(v) == simdjson::SUCCESS ? v : 0;
}

// Tokens and latencies of a result line (OpenAI lines carry usage, no latencies).
void add_result_stats(simdjson::dom::element e, bool is_openai, ShardScan& scan) {
  const std::string_view usage = is_openai ? "/response/body/usage" : "";
  scan.prompt_tokens += int_at(e, std::string(usage) + "/prompt_tokens");
  scan.completion_tokens += int_at(e, std::string(usage) + "/completion_tokens");
  double ttft = 0, e2e = 0;
  if (e.at_pointer("/metrics/ttft_ms").get_double().get(ttft) == simdjson::SUCCESS &&
      e.at_pointer("/metrics/e2e_ms").get_double().get(e2e) == simdjson::SUCCESS) {
    scan.ttft_ms.push_back(ttft);
    scan.e2e_ms.push_back(e2e);
  }
}

}  // namespace

ShardScanner::ShardScanner(const InputIndex& index, const std::vector<std::string>& files)
    : index_(index), files_(files) {
  scan_.slots.resize(static_cast<size_t>(index.num_lines) + 1);
}

void ShardScanner::scan(int file, const ShardSpec& shard) {
  JsonlReader reader(files_[static_cast<size_t>(file)]);
  JsonlLine line;
  FileProblems p;
  simdjson::dom::parser parser;
  while (reader.next(line)) {
    if (line.truncated) {
      p.torn_line = line.line_no;
      break;
    }
    place(file, shard, line, parser, p);
  }
  report(file, shard, p);
}

// Finds the input line one output line answers and records it there, or notes why it cannot.
void ShardScanner::place(int file, const ShardSpec& shard, const JsonlLine& line, simdjson::dom::parser& parser,
                         FileProblems& p) {
  simdjson::dom::element doc;
  simdjson::dom::object obj;
  std::optional<OutputKey> key;
  if (parser.parse(line.buffer.data(), line.size, false).get(doc) == simdjson::SUCCESS &&
      doc.get_object().get(obj) == simdjson::SUCCESS) {
    key = output_line_key(obj);
  }
  if (!key) {
    p.not_output.push_back(line.line_no);
    return;
  }
  const int64_t input_line = key->is_error ? key->line : index_.result_line(key->id_json, shard);
  if (input_line < 0) {
    p.unknown_ids.push_back(key->id_json);
  } else if (input_line > index_.num_lines || index_.has_line[static_cast<size_t>(input_line)] == 0) {
    p.no_such_line.push_back(input_line);
  } else if (shard.count > 0 && !shard.owns(input_line)) {
    p.foreign.push_back(input_line);
  } else {
    record(file, input_line, {line.begin_offset, file, static_cast<int32_t>(line.end_offset - line.begin_offset), key->is_error});
    if (!key->is_error) add_result_stats(doc, obj.at_key("custom_id").error() == simdjson::SUCCESS, scan_);
  }
}

void ShardScanner::record(int file, int64_t input_line, const OutputSlot& slot) {
  OutputSlot& existing = scan_.slots[static_cast<size_t>(input_line)];
  if (existing.file >= 0) {
    scan_.answered_twice[{existing.file, file}].push_back(input_line);
    return;
  }
  existing = slot;
}

void ShardScanner::report(int file, const ShardSpec& shard, FileProblems& p) {
  const std::string name = "'" + files_[static_cast<size_t>(file)] + "'";
  auto add = [&](const std::string& text) { scan_.problems.push_back(name + ": " + text); };
  if (p.torn_line > 0) {
    add("its last line (line " + std::to_string(p.torn_line) +
        ") is torn (no newline: the task was stopped while writing it); rerun the task with --resume");
  }
  if (!p.not_output.empty()) add("lines " + list_lines(p.not_output) + " are not cbatch output lines");
  if (!p.no_such_line.empty()) {
    add("error lines for input lines " + list_lines(p.no_such_line) + ", which are blank or past the input's " +
        std::to_string(index_.num_lines) + " lines");
  }
  if (!p.foreign.empty()) {
    std::sort(p.foreign.begin(), p.foreign.end());
    add("answers input lines " + list_lines(p.foreign) + ", which belong to other shards than " + shard.name());
  }
  if (!p.unknown_ids.empty()) {
    std::string ids;
    for (size_t i = 0; i < p.unknown_ids.size() && i < 5; ++i) ids += (i > 0 ? ", " : "") + p.unknown_ids[i];
    add(std::to_string(p.unknown_ids.size()) + " results have ids that no input line" +
        (shard.count > 0 ? " of shard " + shard.name() : std::string()) + " has: " + ids);
  }
}

}  // namespace cbatch
