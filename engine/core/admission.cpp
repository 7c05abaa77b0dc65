#include "engine/core/admission.hpp"

#include <algorithm>

#include "engine/core/lora_requests.hpp"
#include "engine/sample/sampler.hpp"

namespace cbatch {

// Why an embedding request cannot run here ("" when it can): each input is computed whole in one step.
std::string Admission::embedding_refusal(const Request& request) const {
  const SchedulerConfig& sc = config_.scheduler;
  if (sc.mode == Mode::kStatic) return "embedding requests run in continuous or sequential mode, not static";
  if (!backend_.traits().pools_embeddings) return "the " + backend_.traits().device_name + " backend does not compute embeddings (use --device cpu)";
  const size_t n = request.embedding_inputs.size();
  if (n == 0) return "the request has no input";
  for (size_t i = 0; i < n; ++i) {
    const int64_t tokens = static_cast<int64_t>(request.embedding_inputs[i].size());
    const std::string which = embedding_input_field(request.form, *request.embedding, n, i) + " has ";
    if (tokens > sc.max_num_batched_tokens) {
      return which + std::to_string(tokens) + " tokens, more than the step's budget (--max-num-batched-tokens " +
             std::to_string(sc.max_num_batched_tokens) + "); an embedding input is computed whole in one step";
    }
    if (blocks_.pages_for_request(tokens, 1, 0, false, 0) > blocks_.num_blocks()) {
      return which + std::to_string(tokens) + " tokens, more than the whole KV cache holds";
    }
  }
  return "";
}

// Each input of an embedding request becomes a sequence of its own (its prompt only), gathered by
// their EmbeddingGroup when done; the request itself is shared by them.
void Admission::admit_embedding(Request&& request) {
  if (const std::string why = embedding_refusal(request); !why.empty()) return results_.reject(request, why);
  std::vector<std::vector<int32_t>> inputs = std::move(request.embedding_inputs);
  std::vector<int32_t> segments = std::move(request.embedding_segments);
  request.embedding_inputs.clear();
  request.embedding_segments.clear();
  const auto shared = std::make_shared<const Request>(std::move(request));
  auto group = std::make_shared<EmbeddingGroup>(static_cast<int>(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->request = shared;
    seq->rng_seed = shared->rng_seed;
    if (!segments.empty()) seq->second_segment = segments[i];
    seq->num_prompt_tokens = static_cast<int>(inputs[i].size());
    seq->tokens = std::move(inputs[i]);
    seq->max_total_tokens = seq->num_prompt_tokens;
    seq->arrival_ns = engine_now_ns();
    seq->embedding_group = group;
    seq->embedding_index = static_cast<int>(i);
    Sequence* raw = seq.get();
    live_.emplace(raw, std::move(seq));
    scheduler_.add(raw);
  }
}

// A request becomes its sequences (one per prompt of a list), which run only if every one can.
void Admission::admit(Request&& request) {
  if (std::string error = resolve_lora(request, config_.lora_names, model_.path); !error.empty()) {
    return results_.reject(request, error);
  }
  if (request.embedding) return admit_embedding(std::move(request));
  std::vector<std::unique_ptr<Sequence>> seqs = split_prompts(std::move(request));
  for (auto& seq : seqs) {
    if (std::string error = prepare(*seq); !error.empty()) {
      if (seqs.size() > 1) error = "body.prompt[" + std::to_string(seq->prompt_index) + "]: " + error;
      results_.reject(*seq->request, error);
      return;
    }
  }
  for (auto& seq : seqs) start(std::move(seq));
}

// One sequence per prompt, all sharing the request; a list's sequences share one group of (prompts * n)
// samples, prompt p's samples being p * n .. p * n + n - 1 (OpenAI's and vLLM's choice index). With a
// seed every prompt draws as its own line with that seed would (vLLM's per-prompt requests); without
// one, sample p * n + i's seed is derived from (--seed, id, p * n + i), so the prompts of a list draw apart.
std::vector<std::unique_ptr<Sequence>> Admission::split_prompts(Request&& request) {
  std::vector<std::vector<int32_t>> list = std::move(request.prompt_list);
  request.prompt_list.clear();
  const bool is_list = !list.empty();
  if (!is_list) list.push_back(std::move(request.prompt_ids));
  request.prompt_ids.clear();
  const auto shared = std::make_shared<const Request>(std::move(request));
  const int n = shared->sampling.n;
  std::vector<std::unique_ptr<Sequence>> seqs;
  auto group = is_list ? std::make_shared<SampleGroup>(static_cast<int>(list.size()) * n) : nullptr;
  for (size_t p = 0; p < list.size(); ++p) {
    std::unique_ptr<Sequence> seq = make_sequence(shared, std::move(list[p]));
    seq->prompt_index = static_cast<int>(p);
    if (is_list && !shared->sampling.seed) {
      seq->rng_seed = sample_rng_seed(std::nullopt, config_.seed, shared->id_json, static_cast<int>(p) * n);
    }
    seq->group = group;
    seq->sample_index = static_cast<int>(p) * n;
    seqs.push_back(std::move(seq));
  }
  return seqs;
}

std::unique_ptr<Sequence> Admission::make_sequence(std::shared_ptr<const Request> request,
                                                   std::vector<int32_t> prompt) {
  auto seq = std::make_unique<Sequence>();
  seq->num_prompt_tokens = static_cast<int>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->max_total_tokens = std::min(seq->num_prompt_tokens + request->sampling.max_tokens, model_.config.max_context);
  seq->arrival_ns = engine_now_ns();
  seq->rng_seed = request->rng_seed;
  seq->pending_samples = request->sampling.n;
  seq->request = std::move(request);
  return seq;
}

// Why the sequence cannot run ("" when it can); sets its constraint.
std::string Admission::prepare(Sequence& seq) {
  if (model_.config.is_encoder()) {
    return "the model is an encoder (" + model_.config.architecture + "): it computes embeddings, it cannot generate text";
  }
  const int n = seq.request->sampling.n;
  if (std::string error = structured_.attach(seq); !error.empty()) return error;
  // Every KV group's blocks: the prompt's once, and each sample's own (the rest of its context plus a copy of
  // a partial block); a windowed group's only what its window spans, except in a static batch.
  const SchedulerConfig& sc = config_.scheduler;
  const int64_t needed = blocks_.pages_for_request(seq.max_total_tokens, n, seq.num_prompt_tokens,
                                                   sc.mode != Mode::kStatic, sc.max_num_batched_tokens);
  if (needed > blocks_.num_blocks()) {
    return "request needs " + std::to_string(needed) + " KV blocks (" + std::to_string(seq.max_total_tokens) +
           " tokens" + (n > 1 ? " for each of n = " + std::to_string(n) + " samples" : "") +
           ") but the whole cache has " + std::to_string(blocks_.num_blocks());
  }
  const int max_together = sc.mode == Mode::kStatic ? std::min(sc.max_num_seqs, sc.max_num_batched_tokens)
                                                    : sc.max_num_seqs;  // a static batch row per sample
  if (n > max_together && sc.mode != Mode::kSequential) {
    return "n = " + std::to_string(n) + " samples run together, more than the " + std::to_string(max_together) +
           " sequences a step may hold (--max-num-seqs" +
           (sc.mode == Mode::kStatic ? std::string(", and --max-num-batched-tokens in static mode)") : ")");
  }
  if (slots_.in_use() && n > slots_.num_slots()) {
    return "n = " + std::to_string(n) + " samples run together, each with its own recurrent state, more than the " +
           std::to_string(slots_.num_slots()) + " state slots (--max-num-seqs, and the memory for them)";
  }
  if (seq.request->sampling.wants_prompt_logprobs() && !backend_.traits().answers_logprob_queries) {
    return "prompt_logprobs: the " + backend_.traits().device_name + " backend does not compute them";
  }
  return "";
}

void Admission::start(std::unique_ptr<Sequence> seq) {
  Sequence* raw = seq.get();
  live_.emplace(raw, std::move(seq));
  // Nothing to generate: done without computing, unless the prompt is to be scored (prompt_logprobs, or
  // a score request: prefill only, its score read from the last position's logits, no token kept).
  if (raw->request->sampling.max_tokens == 0 && !raw->request->sampling.wants_prompt_logprobs() &&
      !raw->request->is_score()) {
    const int n = raw->request->sampling.n;
    if (n > 1 && !raw->group) raw->group = std::make_shared<SampleGroup>(n);
    const int first = raw->sample_index;
    for (int i = 0; i < n; ++i) {
      raw->sample_index = first + i;
      raw->finish_reason = FinishReason::kLength;
      results_.emit(*raw);
    }
    live_.erase(raw);
    return;
  }
  scheduler_.add(raw);
}

}  // namespace cbatch
