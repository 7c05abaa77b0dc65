// The `passages-synthetic` embedding workload of `cbatch bench`: /v1/embeddings-style plain lines
// {"id", "input"} of MS MARCO-like passages without a file. Word counts are log-normal (median 55 words,
// sigma 0.45, clipped to 8..400; MS MARCO's passages average about 56 words), the words drawn from a
// fixed list of common English words. Python's Mersenne twister draws them (python_random.hpp), so
// tools/embed_bench.py makes the same texts from the same seed for the runtime it compares with.
#pragma once
#include <cstdint>
#include <string>

namespace cbatch {

// num_prompts JSONL lines, ids 0.. in order.
std::string passages_synthetic_jsonl(int num_prompts, uint64_t seed);

}  // namespace cbatch
