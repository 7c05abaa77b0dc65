// RequestSource over a JSONL file: reads lines with bounded memory, parses and tokenizes each one, and
// numbers every item (request or rejected line) in input order for --ordered output. With --resume it
// skips lines whose id already has a line in the output file.
#pragma once
#include <string>
#include <unordered_set>

#include "engine/chat_format.hpp"
#include "engine/jsonl_reader.hpp"
#include "engine/model.hpp"
#include "engine/request_parser.hpp"
#include "engine/request_stream.hpp"

namespace cbatch {

class JsonlRequestSource final : public RequestSource {
 public:
  // `chat` renders chat messages (null: they are errors); it must outlive the source.
  JsonlRequestSource(const std::string& path, const Model& model, const ChatFormat* chat,
                     const RequestDefaults& defaults, uint64_t seed,
                     const std::unordered_set<std::string>* skip_ids = nullptr);

  bool next(SourceItem& item) override;
  int64_t num_items() const { return next_index_; }   // requests and errors handed out so far
  int64_t num_skipped() const { return num_skipped_; }
  bool at_end() const { return at_end_; }

 private:
  JsonlReader reader_;
  RequestParser parser_;
  const Model& model_;
  const ChatFormat* chat_;
  uint64_t seed_;
  const std::unordered_set<std::string>* skip_ids_;
  JsonlLine line_;
  int64_t next_index_ = 0;
  int64_t num_skipped_ = 0;
  bool at_end_ = false;
};

}  // namespace cbatch
