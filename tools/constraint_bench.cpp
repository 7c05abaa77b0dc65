// Constraint compile and mask times without a model run: for each JSON schema of a file (one per line),
// the request parser's compile time (schema -> regex or rules, checked), the engine's (once per run:
// the regex's whole DFA, or the grammar's tables over the vocabulary), then the mask time per step of
// a random walk (64 tokens at most, uniform over the allowed ones, seeded) over the model's vocabulary;
// a schema compiled to one regex is walked twice on the same tokens, by its DFA and by the pushdown
// engine, to compare the two paths. Prints one JSON line per schema and a summary line.
// Usage: constraint_bench MODEL.gguf SCHEMAS.jsonl
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>

#include "engine/constrain/constraint_cache.hpp"
#include "engine/constrain/grammar_constraint.hpp"
#include "engine/constrain/json_schema.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/text/tokenizer.hpp"

namespace {

using cbatch::Constraint;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Mask ms per step of a walk; the tokens chosen are appended to `tokens` (or, when given, followed).
double walk_ms(Constraint& c, std::vector<int32_t>& tokens, bool follow, uint32_t seed) {
  std::mt19937 rng(seed);
  int32_t state = c.start();
  double total = 0;
  int masks = 0;
  for (int steps = 0; steps < 64; ++steps) {
    const double t0 = now_ms();
    const std::vector<uint64_t>& mask = c.allowed(state);
    total += now_ms() - t0;
    ++masks;
    int32_t token = -1;
    if (follow) {
      if (static_cast<size_t>(steps) >= tokens.size()) break;
      token = tokens[static_cast<size_t>(steps)];
    } else {
      std::vector<int32_t> allowed;
      for (size_t w = 0; w < mask.size(); ++w) {
        for (uint64_t bits = mask[w]; bits; bits &= bits - 1) allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
      }
      if (allowed.empty() || (c.accepting(state) && rng() % 4 == 0)) break;
      token = allowed[rng() % allowed.size()];
      tokens.push_back(token);
    }
    state = c.advance(state, token);
  }
  return total / masks;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: constraint_bench MODEL.gguf SCHEMAS.jsonl\n";
    return 2;
  }
  std::string chat_template;
  const auto tokenizer = cbatch::load_gguf_model_tokenizer(argv[1], &chat_template);
  const auto trie = std::make_shared<cbatch::TokenTrie>(*tokenizer);
  std::ifstream in(argv[2]);
  std::vector<double> compile_ms, engine_ms, dfa_ms, grammar_ms;
  uint32_t seed = 1;
  for (std::string line; std::getline(in, line); ++seed) {
    const double t0 = now_ms();
    const cbatch::ConstraintSpec spec = cbatch::json_schema_constraint(line);
    cbatch::check_constraint(spec);
    compile_ms.push_back(now_ms() - t0);
    std::vector<int32_t> tokens;
    const bool is_choice = spec.kind == cbatch::ConstraintSpec::Kind::kChoice;  // a trie: no grammar to compare
    const bool is_regex = spec.kind == cbatch::ConstraintSpec::Kind::kRegex || is_choice;
    const double t1 = now_ms();
    cbatch::ConstraintCache cache(trie);
    const std::shared_ptr<Constraint> compiled = cache.get(spec);
    engine_ms.push_back(now_ms() - t1);
    double dfa = -1, pda = -1;
    if (is_regex) {
      dfa = walk_ms(*compiled, tokens, false, seed);
      dfa_ms.push_back(dfa);
    }
    if (!is_choice) {
      cbatch::GrammarConstraint grammar(cbatch::compile_regex_rules(spec.texts), trie);
      pda = walk_ms(grammar, tokens, is_regex, seed);
      grammar_ms.push_back(pda);
    }
    std::printf("{\"schema\": %u, \"kind\": \"%s\", \"compile_ms\": %.3f, \"engine_compile_ms\": %.3f, \"steps\": %zu, "
                "\"dfa_mask_ms\": %.3f, \"grammar_mask_ms\": %.3f}\n",
                seed, is_choice ? "choice" : is_regex ? "regex" : "rules", compile_ms.back(), engine_ms.back(), tokens.size(), dfa, pda);
  }
  std::printf("{\"schemas\": %zu, \"compile_ms_p50\": %.3f, \"compile_ms_p99\": %.3f, \"engine_compile_ms_p50\": %.3f, "
              "\"engine_compile_ms_p99\": %.3f, \"dfa_mask_ms_mean_p50\": %.3f, \"grammar_mask_ms_mean_p50\": %.3f}\n",
              compile_ms.size(), percentile(compile_ms, 0.5), percentile(compile_ms, 0.99), percentile(engine_ms, 0.5),
              percentile(engine_ms, 0.99), percentile(dfa_ms, 0.5), percentile(grammar_ms, 0.5));
  return 0;
}
