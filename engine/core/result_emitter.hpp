// The engine's finished work as result lines: a finished sequence becomes its RequestResult (an n > 1
// request's samples are gathered until the last one finishes, then written as one line), a request the
// engine cannot run becomes its error line; both are counted in the run's stats and handed to the sink.
#pragma once
#include <cstdint>
#include <string>

#include "engine/core/run_stats.hpp"
#include "engine/base/request_stream.hpp"
#include "engine/core/sequence.hpp"
#include "engine/text/reasoning_parser.hpp"

namespace cbatch {

// Nanoseconds of the steady clock: the engine's timestamps (arrival, first token, step times).
int64_t engine_now_ns();

class ResultEmitter {
 public:
  ResultEmitter(ResultSink& sink, RunStats& stats) : sink_(sink), stats_(stats) {}
  // Chat results are then split into thinking and answer (nullptr: no split).
  void set_reasoning_parser(const ReasoningParser* parser) { reasoning_ = parser; }

  // The sequence has finished (finish_reason set): its line, or for one sample of n > 1 its part of one.
  void emit(const Sequence& seq);
  // The request cannot run: an error line "line L: message".
  void reject(const Request& request, const std::string& message);
  // A line the source could not turn into a request.
  void fail(const RequestError& error);

 private:
  void emit_sample(const Sequence& seq);
  void emit_embedding(const Sequence& seq);
  // prompt_and_cached: the line's prompt tokens and those the prefix cache served (summed over a list).
  void finish_result(const Sequence& seq, int64_t first_token_ns, RequestResult& result,
                     std::pair<int, int> prompt_and_cached);

  // The sequence's output as answer text and thinking (nullopt), or unsplit when no parser applies.
  std::pair<std::string, std::optional<std::string>> split_output(const Sequence& seq) const;
  bool splits(const Sequence& seq) const { return reasoning_ != nullptr && seq.request->is_chat; }

  ResultSink& sink_;
  RunStats& stats_;
  const ReasoningParser* reasoning_ = nullptr;
};

}  // namespace cbatch
