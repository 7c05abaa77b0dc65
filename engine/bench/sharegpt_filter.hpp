// vLLM's ShareGPT length filter (benchmarks' is_valid_sequence with its defaults): a (prompt, output) pair is
// dropped when either is shorter than 4 tokens, the prompt is longer than 1,024 or both together are longer
// than 2,048. The file dataset and the synthetic one both apply it; for_context() also drops pairs that do
// not fit a model's context (as SGLang's --sharegpt-context-len), which changes nothing at 2,048 or more.
#pragma once

namespace cbatch {

struct ShareGptFilter {
  int min_len = 4;
  int max_prompt_len = 1024;
  int max_total_len = 2048;

  bool accepts(int prompt_len, int output_len) const {
    return prompt_len >= min_len && output_len >= min_len && prompt_len <= max_prompt_len &&
           prompt_len + output_len <= max_total_len;
  }

  static ShareGptFilter for_context(int context_len) {
    ShareGptFilter filter;
    if (context_len < filter.max_total_len) filter.max_total_len = context_len;
    if (context_len - 1 < filter.max_prompt_len) filter.max_prompt_len = context_len - 1;
    return filter;
  }
};

}  // namespace cbatch
