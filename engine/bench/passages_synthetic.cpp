#include "engine/bench/passages_synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "engine/bench/python_random.hpp"

namespace cbatch {
namespace {

// tools/embed_bench.py's WORDS, in the same order.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "her",
    "she", "there", "been", "one", "all", "we", "their", "has", "would", "when", "if", "so", "no", "will", "more",
    "what", "out", "up", "into", "can", "who", "about", "some", "them", "other", "than", "then", "its", "time",
    "two", "may", "over", "also", "new", "any", "these", "after", "first", "most", "made", "people", "water",
    "river", "city", "health", "report", "market", "energy", "system", "music", "history", "science", "school",
    "government", "company", "research", "student", "family", "country", "world", "information", "program",
    "question", "service", "development", "university", "children", "change", "result", "example", "season",
    "population"};

}  // namespace

std::string passages_synthetic_jsonl(int num_prompts, uint64_t seed) {
  PythonRandom rng(seed);
  const uint32_t num_words = static_cast<uint32_t>(std::size(kWords));
  std::string out;
  for (int i = 0; i < num_prompts; ++i) {
    const double drawn = std::exp(rng.normalvariate(std::log(55.0), 0.45));  // random.lognormvariate
    const int n = std::min(400, std::max(8, static_cast<int>(drawn)));
    out += "{\"id\": " + std::to_string(i) + ", \"input\": \"";
    for (int w = 0; w < n; ++w) {
      if (w > 0) out += ' ';
      out += kWords[rng.randbelow(num_words)];
    }
    out += "\"}\n";
  }
  return out;
}

}  // namespace cbatch
