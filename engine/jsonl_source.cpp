#include "engine/jsonl_source.hpp"

#include "engine/request_builder.hpp"

namespace cbatch {

JsonlRequestSource::JsonlRequestSource(const std::string& path, const Model& model, const ChatFormat* chat,
                                       const RequestDefaults& defaults, uint64_t seed,
                                       const std::unordered_set<std::string>* skip_ids)
    : reader_(path), parser_(defaults), model_(model), chat_(chat), seed_(seed), skip_ids_(skip_ids) {}

bool JsonlRequestSource::next(SourceItem& item) {
  for (;;) {
    if (!reader_.next(line_)) {
      at_end_ = true;
      return false;
    }
    ParsedRequest parsed = parser_.parse(line_);
    if (auto* error = std::get_if<RequestError>(&parsed)) {
      if (skip_ids_ != nullptr && skip_ids_->count(error->id_json) != 0) {
        ++num_skipped_;
        continue;
      }
      error->index = next_index_++;
      item = std::move(*error);
      return true;
    }
    RequestInput& input = std::get<RequestInput>(parsed);
    if (skip_ids_ != nullptr && skip_ids_->count(input.id_json) != 0) {
      ++num_skipped_;
      continue;
    }
    auto built = build_request(std::move(input), next_index_++, model_, chat_, seed_);
    if (auto* request = std::get_if<Request>(&built)) {
      item = std::move(*request);
    } else {
      item = std::move(std::get<RequestError>(built));
    }
    return true;
  }
}

}  // namespace cbatch
