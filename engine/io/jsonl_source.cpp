#include "engine/io/jsonl_source.hpp"

#include "engine/io/prompt_limit.hpp"
#include "engine/io/request_builder.hpp"

namespace cbatch {

JsonlRequestSource::JsonlRequestSource(const std::string& path, const Model& model, const ChatFormat* chat,
                                       const RequestDefaults& defaults, uint64_t seed, const ResumeState* resume)
    : reader_(path), parser_(defaults), model_(model), chat_(chat), seed_(seed), resume_(resume),
      prompt_byte_limit_(max_prompt_bytes(*model.tokenizer, model.config.max_context)) {}

bool JsonlRequestSource::next(SourceItem& item) {
  for (;;) {
    if (!reader_.next(line_)) return false;
    if (!shard_.owns(line_.line_no)) continue;
    ParsedRequest parsed = parser_.parse(line_);
    reject_duplicate(parsed);
    if (is_finished(parsed)) continue;
    if (auto* error = std::get_if<RequestError>(&parsed)) {
      error->index = next_index_++;
      item = std::move(*error);
    } else {
      item = build(std::move(std::get<RequestInput>(parsed)));
    }
    return true;
  }
}

// Every line that parses claims its id, also on resume when its output line already exists.
void JsonlRequestSource::reject_duplicate(ParsedRequest& parsed) {
  auto* input = std::get_if<RequestInput>(&parsed);
  if (input == nullptr || seen_ids_.insert(input->id_json, input->line)) return;
  ++num_duplicates_;
  parsed = make_duplicate_id_error(*input, seen_ids_.line_of(input->id_json));
}

// On resume: whether the line already has its output line (then it is counted and skipped).
bool JsonlRequestSource::is_finished(const ParsedRequest& parsed) {
  if (resume_ == nullptr) return false;
  if (resume_->has_error_line(line_.line_no)) {
    ++num_resumed_failed_;
    return true;
  }
  const auto* input = std::get_if<RequestInput>(&parsed);
  if (input != nullptr && resume_->has_result(input->id_json)) {
    ++num_resumed_ok_;
    return true;
  }
  return false;
}

SourceItem JsonlRequestSource::build(RequestInput&& input) {
  // An embedding input longer than the context is truncated, not refused.
  if (auto message = input.embedding ? std::nullopt : check_prompt_bytes(input, prompt_byte_limit_, model_.config.max_context)) {
    return make_input_error(input, next_index_++, *message);
  }
  auto built = build_request(std::move(input), next_index_++, model_, chat_, seed_, rerank_);
  if (auto* request = std::get_if<Request>(&built)) return std::move(*request);
  return std::move(std::get<RequestError>(built));
}

}  // namespace cbatch
