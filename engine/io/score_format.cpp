#include "engine/io/score_format.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

namespace cbatch {
namespace {

void write_usage(JsonWriter& w, const RequestResult& r, bool is_rerank) {
  w.key("usage").begin_object();
  w.key("prompt_tokens").int64(r.prompt_tokens);
  w.key("total_tokens").int64(r.prompt_tokens);
  if (!is_rerank) w.key("completion_tokens").int64(0);
  w.end_object();
}

void write_rerank_results(JsonWriter& w, const RequestResult& r) {
  std::vector<size_t> order(r.samples.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return r.samples[a].score > r.samples[b].score; });
  const int top_n = r.request->top_n;
  if (top_n > 0 && static_cast<size_t>(top_n) < order.size()) order.resize(static_cast<size_t>(top_n));
  w.key("results").begin_array();
  for (size_t i : order) {
    w.begin_object();
    w.key("index").int64(static_cast<int64_t>(i));
    w.key("document").begin_object().key("text").string(r.request->documents[i]).end_object();
    w.key("relevance_score").number(r.samples[i].score);
    w.end_object();
  }
  w.end_array();
}

}  // namespace

void write_score_body(JsonWriter& w, const RequestResult& r, const std::string& id, int64_t created_s,
                      const std::string& model) {
  const bool is_rerank = r.request->form == RequestForm::kOpenAIRerank;
  w.begin_object();
  w.key("id").string((is_rerank ? "rerank-" : "score-") + id);
  if (!is_rerank) w.key("object").string("list").key("created").int64(created_s);
  w.key("model").string(model);
  if (is_rerank) {
    write_rerank_results(w, r);
  } else {
    w.key("data").begin_array();
    for (size_t i = 0; i < r.samples.size(); ++i) {
      w.begin_object().key("index").int64(static_cast<int64_t>(i)).key("object").string("score");
      w.key("score").number(r.samples[i].score).end_object();
    }
    w.end_array();
  }
  write_usage(w, r, is_rerank);
  w.end_object();
}

}  // namespace cbatch
