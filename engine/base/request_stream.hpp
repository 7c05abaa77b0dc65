// The engine's two ends: where requests come from (a JSONL file, or bench's synthetic workload) and
// where results go (the output writer, or bench's collector). Both are small interfaces so the engine
// loop never knows about files or JSON.
#pragma once
#include <variant>

#include "engine/base/request.hpp"
#include "engine/base/request_result.hpp"

namespace cbatch {

using SourceItem = std::variant<Request, RequestError>;

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request or rejected line; false at the end of the input.
  virtual bool next(SourceItem& item) = 0;
  // Whether next() can answer without waiting on a slow producer (a pipe with nothing in it yet); the
  // engine then runs a step instead of waiting, when it has one to run.
  virtual bool ready() const { return true; }
};

class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void on_result(const RequestResult& result) = 0;
  virtual void on_error(const RequestError& error) = 0;
};

}  // namespace cbatch
