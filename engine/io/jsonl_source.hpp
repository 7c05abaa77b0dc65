// RequestSource over a JSONL file: reads lines with bounded memory, parses and tokenizes each one, and
// numbers every item (request or rejected line) in input order for --ordered output. Ids must be
// unique: the first line with an id runs, every later one gets a "duplicate id" error line. With
// --resume it skips lines that already have an output line (results by id, errors by line number),
// while still tracking their ids, so a resumed run writes exactly the lines a clean run would add.
// With a shard, lines of other shards are skipped before parsing.
#pragma once
#include <string>

#include "engine/text/chat_format.hpp"
#include "engine/io/id_set.hpp"
#include "engine/io/jsonl_reader.hpp"
#include "engine/model/model.hpp"
#include "engine/io/request_parser.hpp"
#include "engine/base/request_stream.hpp"
#include "engine/io/rerank_template.hpp"
#include "engine/io/resume.hpp"
#include "engine/io/shard_spec.hpp"

namespace cbatch {

class JsonlRequestSource final : public RequestSource {
 public:
  // chat renders chat messages (null: they are errors); resume is the output file's state, or nullptr for
  // a fresh run. Both must outlive the source.
  JsonlRequestSource(const std::string& path, const Model& model, const ChatFormat* chat,
                     const RequestDefaults& defaults, uint64_t seed, const ResumeState* resume = nullptr);

  bool next(SourceItem& item) override;
  bool ready() const override { return reader_.ready(); }
  // A non-zero *flag ends a wait for input: next() then returns false (see JsonlReader::set_stop_flag).
  void set_stop_flag(const std::atomic<int>* flag) { reader_.set_stop_flag(flag); }
  int64_t num_items() const { return next_index_; }  // requests and errors handed out so far
  int64_t num_resumed_ok() const { return num_resumed_ok_; }          // skipped: a result exists
  int64_t num_resumed_failed() const { return num_resumed_failed_; }  // skipped: an error line exists
  int64_t num_duplicates() const { return num_duplicates_; }
  // --shard: only the lines the shard owns are read further; the others are skipped unparsed, so
  // duplicate ids are detected among the shard's own lines only (merge checks across shards).
  void set_shard(const ShardSpec& shard) { shard_ = shard; }
  // --reranker: score and rerank lines are built in its template (it must outlive the source).
  void set_rerank_format(const RerankFormat* format) { rerank_ = format; }

 private:
  void reject_duplicate(ParsedRequest& parsed);
  bool is_finished(const ParsedRequest& parsed);
  SourceItem build(RequestInput&& input);

  JsonlReader reader_;
  RequestParser parser_;
  const Model& model_;
  const ChatFormat* chat_;
  uint64_t seed_;
  const ResumeState* resume_;
  const RerankFormat* rerank_ = nullptr;
  ShardSpec shard_;
  int64_t prompt_byte_limit_;
  IdSet seen_ids_;  // every id of a line that parsed, with its line
  JsonlLine line_;
  int64_t next_index_ = 0;
  int64_t num_resumed_ok_ = 0;
  int64_t num_resumed_failed_ = 0;
  int64_t num_duplicates_ = 0;
};

}  // namespace cbatch
