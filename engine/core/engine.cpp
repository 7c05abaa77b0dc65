// One batch run (EngineRun): admits requests (a list of prompts, n samples and embedding inputs become
// sequences of their own), asks the scheduler for each step's plan, runs the backend, samples, pools or
// scores the rows, and hands finished sequences to the result emitter. Over 500 lines because admission
// and the step loop share the run's state; admission is the part to move into a file of its own next.
#include "engine/core/engine.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/constrain/constraint_mask.hpp"
#include "engine/core/batch_packer.hpp"
#include "engine/core/block_manager.hpp"
#include "engine/core/embedding_output.hpp"
#include "engine/base/error.hpp"
#include "engine/core/logprob_steps.hpp"
#include "engine/core/lora_requests.hpp"
#include "engine/core/result_emitter.hpp"
#include "engine/sample/sampler.hpp"
#include "engine/sample/token_mask.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/base/signal_block.hpp"
#include "engine/core/stop_checker.hpp"
#include "engine/text/reasoning_parser.hpp"
#include "engine/base/thread_pool.hpp"

namespace cbatch {
namespace {

// softmax over the two logits {yes, no}, its "yes" entry: 1 / (1 + exp(no - yes)), in double.
double yes_probability(const float* logits, const std::array<int32_t, 2>& yes_no) {
  const double diff = static_cast<double>(logits[yes_no[1]]) - static_cast<double>(logits[yes_no[0]]);
  return 1.0 / (1.0 + std::exp(diff));
}

// One run's state: the live sequences, the scheduler and block manager of this run, and its counters.
class EngineRun {
 public:
  EngineRun(const EngineConfig& config, const Model& model, Backend& backend, const KvCacheSpec& cache,
            RequestSource& source, ResultSink& sink, const EngineHooks& hooks)
      : config_(config), model_(model), backend_(backend), source_(source), hooks_(hooks), results_(sink, stats_),
        blocks_(cache.num_blocks, cache.block_size, config.scheduler.enable_prefix_caching), scheduler_(make_scheduler(config.scheduler, blocks_)),
        cost_model_(model.config, backend.weight_bytes_per_param(), backend.kv_bytes_per_elem(),
                    backend.expert_bytes_per_param()) {
    if (!config.reasoning_parser.empty()) {
      reasoning_ = std::make_unique<ReasoningParser>(config.reasoning_parser, *model.tokenizer);
      results_.set_reasoning_parser(reasoning_.get());
    }
  }

  RunSummary run() {
    start_ns_ = engine_now_ns();
    for (;;) {
      if (!stopping()) admit();
      if (!scheduler_->has_work()) break;
      step();
      if (stopping()) break;
    }
    RunSummary summary = stats_.summarize(static_cast<double>(engine_now_ns() - start_ns_) * 1e-9);
    summary.interrupted = stopping();
    if (!summary.interrupted && blocks_.num_free() != blocks_.num_blocks()) {
      throw Error("internal error: " + std::to_string(blocks_.num_used()) + " KV blocks not returned at the end of the run");
    }
    return summary;
  }

 private:
  bool stopping() const { return hooks_.stop_signal != nullptr && hooks_.stop_signal->load() != 0; }
  int lookahead() const { return config_.lookahead > 0 ? config_.lookahead : 4 * config_.scheduler.max_num_seqs + 64; }

  void admit() {
    SourceItem item;
    while (!source_done_ && scheduler_->num_waiting() < lookahead()) {
      if (scheduler_->has_work() && !source_.ready()) break;  // step now; read what a pipe has later
      if (!source_.next(item)) {
        source_done_ = true;
        break;
      }
      if (auto* error = std::get_if<RequestError>(&item)) {
        results_.fail(*error);
        continue;
      }
      admit_request(std::move(std::get<Request>(item)));
    }
  }

  // Why an embedding request cannot run here ("" when it can): each input is computed whole in one step.
  std::string embedding_refusal(const Request& request) const {
    const SchedulerConfig& sc = config_.scheduler;
    if (sc.mode == Mode::kStatic) return "embedding requests run in continuous or sequential mode, not static";
    if (!backend_.pools_embeddings()) return "the " + backend_.device_name() + " backend does not compute embeddings (use --device cpu)";
    const size_t n = request.embedding_inputs.size();
    if (n == 0) return "the request has no input";
    for (size_t i = 0; i < n; ++i) {
      const int64_t tokens = static_cast<int64_t>(request.embedding_inputs[i].size());
      const std::string which = embedding_input_field(request.form, *request.embedding, n, i) + " has ";
      if (tokens > sc.max_num_batched_tokens) {
        return which + std::to_string(tokens) + " tokens, more than the step's budget (--max-num-batched-tokens " +
               std::to_string(sc.max_num_batched_tokens) + "); an embedding input is computed whole in one step";
      }
      if (blocks_.blocks_for_tokens(static_cast<int>(tokens)) > blocks_.num_blocks()) {
        return which + std::to_string(tokens) + " tokens, more than the whole KV cache holds";
      }
    }
    return "";
  }

  // Each input of an embedding request becomes a sequence of its own (its prompt only), gathered by
  // their EmbeddingGroup when done; the request itself is shared by them.
  void admit_embedding(Request&& request) {
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
      scheduler_->add(raw);
    }
  }

  // A request becomes its sequences (one per prompt of a list), which run only if every one can.
  void admit_request(Request&& request) {
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
  std::vector<std::unique_ptr<Sequence>> split_prompts(Request&& request) {
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

  std::unique_ptr<Sequence> make_sequence(std::shared_ptr<const Request> request, std::vector<int32_t> prompt) {
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
  std::string prepare(Sequence& seq) {
    if (model_.config.is_encoder()) {
      return "the model is an encoder (" + model_.config.architecture + "): it computes embeddings, it cannot generate text";
    }
    const int n = seq.request->sampling.n;
    if (seq.request->sampling.is_constrained()) {
      try {
        seq.constraint = constraints().get(seq.request->sampling.constraint);
      } catch (const Error& e) {
        return e.what();
      }
      seq.constraint_state = seq.constraint->start();
      defer_constraint_while_thinking(seq);
    }
    // The prompt's blocks once, and each sample's own: the rest of its context plus a copy of a partial block.
    const int prompt_full = seq.num_prompt_tokens / blocks_.block_size();
    const int64_t needed = blocks_.blocks_for_tokens(seq.max_total_tokens) +
                           int64_t{n - 1} * (blocks_.blocks_for_tokens(seq.max_total_tokens) - prompt_full);
    if (needed > blocks_.num_blocks()) {
      return "request needs " + std::to_string(needed) + " KV blocks (" + std::to_string(seq.max_total_tokens) +
             " tokens" + (n > 1 ? " for each of n = " + std::to_string(n) + " samples" : "") +
             ") but the whole cache has " + std::to_string(blocks_.num_blocks());
    }
    const SchedulerConfig& sc = config_.scheduler;
    const int max_together = sc.mode == Mode::kStatic ? std::min(sc.max_num_seqs, sc.max_num_batched_tokens)
                                                      : sc.max_num_seqs;  // a static batch row per sample
    if (n > max_together && sc.mode != Mode::kSequential) {
      return "n = " + std::to_string(n) + " samples run together, more than the " + std::to_string(max_together) +
             " sequences a step may hold (--max-num-seqs" +
             (sc.mode == Mode::kStatic ? std::string(", and --max-num-batched-tokens in static mode)") : ")");
    }
    if (seq.request->sampling.wants_prompt_logprobs() && !backend_.answers_logprob_queries()) {
      return "prompt_logprobs: the " + backend_.device_name() + " backend does not compute them";
    }
    return "";
  }

  void start(std::unique_ptr<Sequence> seq) {
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
    scheduler_->add(raw);
  }

  // What the backend returns for the step's sampling rows: argmax ids when every row is greedy without
  // penalties or constraint; the draws themselves when the backend samples on its device (each row's
  // parameters, penalty tokens and constraint mask); else the logits, for the host's Sampler (which alone
  // applies a logit_bias).
  void request_output(const StepPlan& plan) {
    step_constrained_rows_ = 0;
    step_mask_ms_ = 0;
    constrained_blocked_.clear();
    bool plain_greedy = true;
    bool constrained = false;
    bool biased = false;
    for (const ScheduledSeq& s : plan.seqs) {
      const SamplingParams& p = s.seq->request->sampling;
      plain_greedy = plain_greedy && (!s.samples || (p.is_greedy() && !p.has_penalties()));
      constrained = constrained || (s.samples && s.seq->constraint);
      biased = biased || (s.samples && p.has_logit_bias());
    }
    plain_greedy = plain_greedy && !constrained;
    output_.sampling.clear();
    output_.penalty_tokens.clear();
    output_.token_mask.clear();
    // A forking row draws n tokens from one row of logits: the host samples those.
    const bool forks = std::any_of(plan.seqs.begin(), plan.seqs.end(),
                                   [](const ScheduledSeq& s) { return s.samples && s.seq->pending_samples > 1; });
    // A backend that answers no logprob queries returns the logits of such rows for the host to reduce.
    const bool host_logprobs = !backend_.answers_logprob_queries() && LogprobSteps::any_sampling_row(plan);
    const bool scores = std::any_of(plan.seqs.begin(), plan.seqs.end(),
                                    [](const ScheduledSeq& s) { return s.samples && s.seq->request->is_score(); });
    output_.want_logits =
        scores || host_logprobs || biased || (!plain_greedy && (!backend_.samples_on_device() || forks));
    if (output_.want_logits || plain_greedy) return;
    int64_t mask_ns = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      const Sequence& seq = *s.seq;
      if (!s.samples) continue;
      const SamplingParams& p = seq.request->sampling;
      RowSampling row =
          row_sampling(p, seq.rng_seed, static_cast<int64_t>(seq.tokens.size()) - seq.num_prompt_tokens);
      constrained_blocked_.push_back(false);
      if (seq.constraint) {
        ++step_constrained_rows_;
        const int64_t mask_start = engine_now_ns();
        row.mask_offset = append_constraint_mask(*seq.constraint, seq.constraint_state, model_.tokenizer->eos_ids(),
                                                 model_.config.vocab_size, output_.token_mask);
        mask_ns += engine_now_ns() - mask_start;
        if (row.mask_offset < 0) {  // nothing may follow: the row ends (commit), its plain argmax unused
          constrained_blocked_.back() = true;
          output_.sampling.push_back(RowSampling{});
          continue;
        }
      }
      if (p.has_penalties()) {
        row.penalty_begin = static_cast<int32_t>(output_.penalty_tokens.size());
        append_penalty_tokens(seq.tokens, seq.num_prompt_tokens, model_.config.vocab_size, output_.penalty_tokens,
                              penalty_slot_);
        row.penalty_end = static_cast<int32_t>(output_.penalty_tokens.size());
      }
      output_.sampling.push_back(row);
    }
    step_mask_ms_ = static_cast<double>(mask_ns) * 1e-6;
  }

  void step() {
    const int64_t t0 = engine_now_ns();
    const StepPlan plan = scheduler_->schedule();
    if (plan.empty()) throw Error("internal error: the scheduler could not schedule any work");
    kv_blocks_in_step_ = blocks_.num_used();
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.seq->first_step < 0) s.seq->first_step = step_;
    }
    pack_batch(plan, blocks_.block_size(), batch_);
    request_output(plan);
    logprob_steps_.add_queries(plan, batch_, output_);
    const int64_t t1 = engine_now_ns();
    backend_.forward(batch_, output_);
    const int64_t t2 = engine_now_ns();
    logprob_steps_.store_prompt(output_);
    const int finished = commit(plan);
    for (Sequence* seq : scheduler_->on_step_done(plan)) live_.erase(seq);
    record_step(plan, {t0, t1, t2}, finished);
    ++step_;
  }

  // The next token of every sampling row: the backend's ids (argmax, or its own draws), else one draw per
  // row from its logits, the rows spread over the sampling threads (each row's draw depends only on its
  // own logits and request, so the split never changes a token).
  void sample_rows(const StepPlan& plan) {
    sampling_rows_.clear();
    logits_row_.clear();
    for (const ScheduledSeq& s : plan.seqs) {
      if (!s.samples) continue;
      logits_row_.push_back(static_cast<int32_t>(sampling_rows_.size()));
      sampling_rows_.push_back(s.seq);
    }
    const int64_t num_logits = static_cast<int64_t>(sampling_rows_.size());
    for (auto& [child, row] : forked_) {
      sampling_rows_.push_back(child);
      logits_row_.push_back(row);
    }
    const int64_t n = static_cast<int64_t>(sampling_rows_.size());
    sampled_.resize(static_cast<size_t>(n));
    if (!output_.want_logits) {
      if (output_.token_ids.size() != static_cast<size_t>(num_logits)) {
        throw Error("internal error: the backend returned " + std::to_string(output_.token_ids.size()) +
                    " token ids for " + std::to_string(num_logits) + " sampling rows");
      }
      for (int64_t i = 0; i < n; ++i) sampled_[static_cast<size_t>(i)] = output_.token_ids[static_cast<size_t>(logits_row_[static_cast<size_t>(i)])];
      return;
    }
    const int vocab = model_.config.vocab_size;
    // Each draw gets a row of its own: the sampler changes its row (penalties), and forked samples share
    // their parent's row, so theirs are copied first.
    row_logits_.resize(static_cast<size_t>(n));
    constrained_blocked_.assign(static_cast<size_t>(n), false);
    fork_logits_.resize(static_cast<size_t>(n - num_logits) * vocab);
    for (int64_t i = 0; i < n; ++i) {
      float* row = &output_.logits[static_cast<size_t>(logits_row_[static_cast<size_t>(i)]) * vocab];
      if (i >= num_logits) {
        float* copy = &fork_logits_[static_cast<size_t>(i - num_logits) * vocab];
        std::copy_n(row, vocab, copy);
        row = copy;
      }
      row_logits_[static_cast<size_t>(i)] = row;
    }
    logprob_steps_.keep_raw_rows(sampling_rows_, row_logits_);  // before masks and penalties change them
    for (int64_t i = 0; i < n; ++i) {
      Sequence& seq = *sampling_rows_[static_cast<size_t>(i)];
      if (seq.request->is_score()) seq.score = yes_probability(row_logits_[static_cast<size_t>(i)], seq.request->score_token_ids);
    }
    const int64_t mask_start = engine_now_ns();
    step_constrained_rows_ = 0;
    for (int64_t i = 0; i < n; ++i) {
      Sequence& seq = *sampling_rows_[static_cast<size_t>(i)];
      if (!seq.constraint) continue;
      constrained_blocked_[static_cast<size_t>(i)] = !apply_constraint(seq, row_logits_[static_cast<size_t>(i)]);
      ++step_constrained_rows_;
    }
    step_mask_ms_ = step_constrained_rows_ > 0 ? static_cast<double>(engine_now_ns() - mask_start) * 1e-6 : 0.0;
    auto sample_range = [&](int64_t begin, int64_t end) {
      thread_local Sampler sampler;  // scratch of one vocabulary per thread, kept between steps
      for (int64_t row = begin; row < end; ++row) {
        Sequence& seq = *sampling_rows_[static_cast<size_t>(row)];
        sampled_[static_cast<size_t>(row)] = sampler.sample(row_logits_[static_cast<size_t>(row)], vocab,
                                                            seq.request->sampling, seq.tokens, seq.num_prompt_tokens,
                                                            seq.rng_seed);
      }
    };
    if (n < 2 || config_.sampling_threads == 1) return sample_range(0, n);
    if (!sampling_pool_) {
      const StopSignalsBlocked blocked;  // the stop handler runs on the main thread, never on a worker
      sampling_pool_ = std::make_unique<ThreadPool>(config_.sampling_threads);
    }
    sampling_pool_->parallel_for(n, sample_range);
  }

  // The step's pooled sequences (embedding requests, whole in this step, in plan order) finish with their
  // vectors; returns how many.
  int finish_embeddings(const StepPlan& plan) {
    const int dim = model_.config.pooled_width();
    int pooled = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      Sequence& seq = *s.seq;
      if (!seq.request->embedding) continue;
      if (static_cast<size_t>(pooled + 1) * dim > output_.pooled.size()) {
        throw Error("internal error: the backend pooled fewer sequences than the step computed whole");
      }
      seq.embedding = finish_embedding(&output_.pooled[static_cast<size_t>(pooled++) * dim], dim, *seq.request->embedding);
      seq.finish_reason = FinishReason::kStop;
      seq.finish_step = step_;
      seq.first_token_ns = engine_now_ns();
      results_.emit(seq);
    }
    return pooled;
  }

  // Advances computed counts, appends the sampled tokens, checks stops; returns how many sequences finished.
  int commit(const StepPlan& plan) {
    for (const ScheduledSeq& s : plan.seqs) s.seq->num_computed += s.num_tokens;
    int finished = finish_embeddings(plan);
    fork_samples(plan);
    sample_rows(plan);
    logprob_steps_.make_generated(sampling_rows_, sampled_, output_);
    for (size_t row = 0; row < sampling_rows_.size(); ++row) {
      Sequence& seq = *sampling_rows_[row];
      if (seq.first_token_ns == 0) seq.first_token_ns = engine_now_ns();
      if (row < constrained_blocked_.size() && constrained_blocked_[row]) {
        seq.finish_reason = FinishReason::kLength;  // no token can continue the constraint: cut, like max_tokens
      } else if (seq.request->sampling.max_tokens == 0) {
        seq.finish_reason = FinishReason::kLength;  // a prompt scored for its prompt_logprobs only
      } else {
        logprob_steps_.append_generated(row, seq);
        if (seq.constraint && !model_.tokenizer->is_eos(sampled_[row])) {
          seq.constraint_state = seq.constraint->advance(seq.constraint_state, sampled_[row]);
          if (seq.constraint_state == ByteDfa::kDead) {  // a backend that drew outside the step's mask
            throw Error("internal error: token " + std::to_string(sampled_[row]) + " drawn for line " +
                        std::to_string(seq.request->line) + " is outside its structured-output constraint");
          }
        }
        const size_t old_text_size = seq.text.size();
        append_token(seq, sampled_[row], *model_.tokenizer);
        if (seq.constraint_after_thinking) start_constraint_after_thinking(seq, old_text_size);
      }
      if (seq.is_finished()) {
        seq.finish_step = step_;
        results_.emit(seq);
        ++finished;
      }
    }
    return finished;
  }

  // Under a reasoning parser a chat's structured output applies to the answer only: its constraint waits
  // until the thinking ends, unless the prompt already closed it (Qwen3 with enable_thinking false).
  void defer_constraint_while_thinking(Sequence& seq) {
    if (!reasoning_ || !seq.request->is_chat || reasoning_->prompt_closes_thinking(seq.prompt())) return;
    seq.constraint_after_thinking = std::move(seq.constraint);
    seq.constraint = nullptr;
  }

  void start_constraint_after_thinking(Sequence& seq, size_t old_text_size) {
    const std::span<const int32_t> output(seq.tokens.data() + seq.num_prompt_tokens,
                                          static_cast<size_t>(seq.num_generated()));
    if (!reasoning_->ends_thinking(output, seq.text, old_text_size)) return;
    seq.constraint = std::move(seq.constraint_after_thinking);
    seq.constraint_after_thinking = nullptr;
    seq.constraint_state = seq.constraint->start();
  }

  // The run's constraint automata, over the tokenizer's vocabulary trie (built at the first constrained request).
  ConstraintCache& constraints() {
    if (!constraints_) constraints_ = std::make_unique<ConstraintCache>(std::make_shared<TokenTrie>(*model_.tokenizer));
    return *constraints_;
  }

  // Masks a constrained row's logits: tokens that cannot continue the constraint get -inf, and EOS stays
  // only where the output is a full match (then it is also the only choice if nothing may follow).
  // Returns false when no token at all is allowed.
  bool apply_constraint(Sequence& seq, float* logits) {
    const int vocab = model_.config.vocab_size;
    mask_words_.resize(static_cast<size_t>(token_mask_words(vocab)));
    const bool any = constraint_token_mask(*seq.constraint, seq.constraint_state, model_.tokenizer->eos_ids(), vocab,
                                           mask_words_.data());
    apply_token_mask(logits, vocab, mask_words_.data());
    return any;
  }

  // A request with n > 1 runs as one sequence until its prompt is computed. At the step that samples its
  // first token it becomes n: samples 1..n-1 are copies that share its blocks (copy-on-write keeps their
  // later writes apart) and draw their own first token from the same logits row with their own seeds.
  void fork_samples(const StepPlan& plan) {
    forked_.clear();
    int32_t logits_row = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      if (!s.samples) continue;
      Sequence& parent = *s.seq;
      const int n = parent.pending_samples;
      if (n > 1) {
        parent.pending_samples = 1;
        if (!parent.group) parent.group = std::make_shared<SampleGroup>(n);  // a list's group is made at admission
        for (int i = 1; i < n; ++i) {
          auto child = std::make_unique<Sequence>(parent);
          child->sample_index = parent.sample_index + i;
          const Request& r = *parent.request;
          const int seed_index = r.sampling.seed ? i : child->sample_index;  // see split_prompts
          child->rng_seed = sample_rng_seed(r.sampling.seed, config_.seed, r.id_json, seed_index);
          blocks_.share(child->block_table);
          scheduler_->add_forked(child.get());
          forked_.emplace_back(child.get(), logits_row);
          live_.emplace(child.get(), std::move(child));
        }
      }
      ++logits_row;
    }
  }

  // times: step start, forward start, forward end (ns).
  void record_step(const StepPlan& plan, const std::array<int64_t, 3>& times, int finished) {
    const int64_t end = engine_now_ns();
    StepRecord r;
    r.step = step_;
    r.t_ms = static_cast<double>(end - start_ns_) * 1e-6;
    r.step_ms = static_cast<double>(end - times[0]) * 1e-6;
    r.schedule_ms = static_cast<double>(times[1] - times[0]) * 1e-6;
    r.forward_ms = static_cast<double>(times[2] - times[1]) * 1e-6;
    r.update_ms = static_cast<double>(end - times[2]) * 1e-6;
    r.mode = mode_name(config_.scheduler.mode);
    r.num_seqs = static_cast<int>(plan.seqs.size());
    r.prefill_seqs = plan.num_prefill_seqs();
    r.decode_seqs = plan.num_decode_seqs();
    r.prefill_tokens = plan.num_prefill_tokens();
    r.decode_tokens = plan.num_decode_tokens();
    r.padding_tokens = plan.num_padding_tokens();
    r.sampled_tokens = plan.num_sampling_seqs();
    r.token_budget = config_.scheduler.max_num_batched_tokens;
    r.kv_blocks_used = blocks_.num_used();
    r.kv_blocks_in_step = kv_blocks_in_step_;
    r.kv_blocks_total = blocks_.num_blocks();
    r.waiting = scheduler_->num_waiting();
    r.finished = finished;
    r.preempted = static_cast<int>(plan.preempted.size());
    r.cached_tokens = plan.cached_tokens;
    r.constrained_rows = step_constrained_rows_;
    r.mask_ms = step_mask_ms_;
    r.experts_touched = output_.experts_touched;
    r.embedding_seqs = batch_.num_pooled();  // the batch: the plan's finished sequences are gone by now
    for (int s : batch_.pooled_seqs) r.embedding_tokens += batch_.query_start[s + 1] - batch_.query_start[s];
    r.kv_blocks_cached = blocks_.num_cached();
    if (hooks_.peaks.valid()) {
      const StepCost cost = cost_model_.step_cost(batch_, output_.experts_touched);
      r.roofline_ms = 1e3 * CostModel::roofline_seconds(cost, hooks_.peaks);
      r.flops = cost.flops;
      r.bytes = cost.bytes;
      r.expert_bytes = cost.expert_bytes;
    }
    stats_.add_step(r);
    if (hooks_.on_step) hooks_.on_step(r);
  }

  const EngineConfig& config_;
  const Model& model_;
  Backend& backend_;
  LogprobSteps logprob_steps_{*model_.tokenizer, model_.config.vocab_size};
  RequestSource& source_;
  const EngineHooks& hooks_;
  RunStats stats_;
  ResultEmitter results_;
  std::unique_ptr<ReasoningParser> reasoning_;  // --reasoning-parser, null without one
  BlockManager blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<const Sequence*, std::unique_ptr<Sequence>> live_;
  std::unique_ptr<ThreadPool> sampling_pool_;  // made at the first step that samples several rows
  std::vector<Sequence*> sampling_rows_;        // (tokens sampled this step) their sequences
  std::vector<int32_t> logits_row_;             // (tokens sampled this step) the logits row each draws from
  std::vector<std::pair<Sequence*, int32_t>> forked_;  // samples forked this step, with their parent's row
  std::vector<float*> row_logits_;              // (tokens sampled this step) the logits row each draw uses
  std::vector<bool> constrained_blocked_;       // (tokens sampled this step) its constraint allows no token
  std::unique_ptr<ConstraintCache> constraints_;
  std::vector<uint64_t> mask_words_;            // (token_mask_words(vocab)) scratch of apply_constraint
  int step_constrained_rows_ = 0;               // this step's rows sampled under a constraint
  double step_mask_ms_ = 0;                     // and the time their masks took
  std::vector<float> fork_logits_;              // (samples forked this step, vocab) copies of their parent's row
  std::vector<int32_t> sampled_;                // (sampling rows of the step) their next tokens
  std::vector<int32_t> penalty_slot_;           // (vocab) scratch of append_penalty_tokens, all -1
  RaggedBatch batch_;
  StepOutput output_;
  CostModel cost_model_;
  int64_t start_ns_ = 0;
  int64_t step_ = 0;
  int kv_blocks_in_step_ = 0;  // blocks in use after this step's schedule()
  bool source_done_ = false;
};

}  // namespace

Engine::Engine(const EngineConfig& config, const Model& model, Backend& backend)
    : config_(config), model_(model), backend_(backend) {
  cache_.block_size = config.scheduler.block_size;
  const int64_t limit = backend.max_kv_blocks(cache_.block_size);
  if (config.kv_cache_blocks > 0) {
    if (config.kv_cache_blocks > limit) {
      throw Error("--kv-cache-blocks " + std::to_string(config.kv_cache_blocks) + " exceeds the " +
                  std::to_string(limit) + " blocks that fit the " + backend.device_name() + " memory");
    }
    cache_.num_blocks = config.kv_cache_blocks;
  } else {
    // Enough for every sequence slot at full context; never more than memory allows.
    const int64_t per_seq = (model.config.max_context + cache_.block_size - 1) / cache_.block_size;
    cache_.num_blocks = static_cast<int>(std::min<int64_t>(limit, per_seq * config.scheduler.max_num_seqs));
  }
  if (cache_.num_blocks <= 0) throw Error("no room for a KV cache on " + backend.device_name());
  backend.allocate_kv_cache(cache_);
}

RunSummary Engine::run(RequestSource& source, ResultSink& sink, const EngineHooks& hooks) {
  EngineRun run(config_, model_, backend_, cache_, source, sink, hooks);
  return run.run();
}

}  // namespace cbatch
