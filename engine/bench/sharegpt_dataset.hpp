// The ShareGPT file dataset (`cbatch bench --dataset sharegpt:FILE`), sampled as vLLM's benchmarks sample
// ShareGPT_V3_unfiltered_cleaned_split.json: the conversations with a "conversations" list of at least two
// turns, shuffled as Python's random.seed(--seed); random.shuffle shuffles them, then taken in that order:
// prompt = turn 0's "value", output length = the token count of turn 1's "value" (both tokenized as
// prompts, with BOS where the model adds one, as Hugging Face tokenizers count them), pairs the ShareGPT
// filter drops skipped, until --num-prompts pairs are kept. Outputs are forced to that length (ignore_eos).
// The file is read into memory once and walked with simdjson On Demand (no DOM): only the two turns of
// each conversation are remembered, as views into the file, and only the sampled ones are unescaped.
// Values it skips (other fields, later turns) are checked for their brackets only: a bad number or literal
// inside them goes unnoticed, where Python's json.load would refuse the file.
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/bench/bench_workload.hpp"
#include "engine/bench/sharegpt_filter.hpp"

namespace cbatch {

class ShareGptFile {
 public:
  // Throws cbatch::Error naming the file and what is wrong (unreadable, not JSON, not a list of objects,
  // a "conversations" that is not a list of objects).
  explicit ShareGptFile(std::string path);
  ShareGptFile(const ShareGptFile&) = delete;             // the turns are views into this object's copy
  ShareGptFile& operator=(const ShareGptFile&) = delete;

  size_t num_conversations() const { return turns_.size(); }  // those with >= 2 turns, in file order
  // Turn 0 or 1's "value" of conversation i (0-based among num_conversations()); throws when it has none.
  std::string turn_text(size_t i, int turn) const;
  const std::string& path() const { return path_; }

 private:
  struct FirstTurns {
    size_t entry = 0;                 // position of the conversation in the file's list
    std::string_view turn[2];         // raw JSON of the turn objects, inside json_
  };
  void index(simdjson::ondemand::array entries);

  std::string path_;
  simdjson::padded_string json_;
  std::vector<FirstTurns> turns_;
};

struct ShareGptSample {
  size_t conversation = 0;            // index among ShareGptFile::num_conversations()
  std::vector<int32_t> prompt_ids;
  int output_len = 0;
};

using EncodeText = std::function<std::vector<int32_t>(const std::string&)>;

// Up to num_prompts pairs in vLLM's order for `seed`; fewer only when the file has no more that pass.
std::vector<ShareGptSample> sample_sharegpt(const ShareGptFile& file, uint64_t seed, int num_prompts,
                                            const ShareGptFilter& filter, const EncodeText& encode);

// Throws when fewer than spec.num_prompts pairs pass the filter (vLLM would repeat some; we do not).
std::vector<Request> make_sharegpt_workload(const std::string& path, const WorkloadSpec& spec, const Model& model);

}  // namespace cbatch
