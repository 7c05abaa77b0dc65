// Fuzz target: arbitrary bytes as a ShareGPT file for `bench --dataset sharegpt:FILE`: indexed, every
// conversation's first two turns read, then sampled (one id per byte). Only cbatch::Error may come out,
// and every sampled pair passes the length filter.
#include "engine/bench/sharegpt_dataset.hpp"
#include "engine/base/error.hpp"
#include "fuzz_support.hpp"

using namespace cbatch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::MemFile file("sharegpt");
  try {
    const ShareGptFile sharegpt(file.write(data, size));
    for (size_t i = 0; i < sharegpt.num_conversations(); ++i) {
      for (int turn : {0, 1}) {
        try {
          sharegpt.turn_text(i, turn);
        } catch (const Error&) {
        }
      }
    }
    const EncodeText bytes = [](const std::string& text) { return std::vector<int32_t>(text.size(), 7); };
    const ShareGptFilter filter = ShareGptFilter::for_context(64);
    for (const ShareGptSample& s : sample_sharegpt(sharegpt, size, 4, filter, bytes)) {
      fuzz::require(filter.accepts(static_cast<int>(s.prompt_ids.size()), s.output_len), "sampled pair passes");
    }
  } catch (const Error&) {
  }
  return 0;
}
