// One batch run (EngineRun): admits requests from the source (admission.hpp), and step by step asks the
// scheduler for a plan, packs it, runs the backend, samples (step_sampling.hpp), pools or scores the rows,
// appends tokens and checks stops, and hands finished sequences to the result emitter. A sample of an
// n > 1 request is forked from its parent at the step that draws its first token.
#include "engine/core/engine.hpp"

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/core/admission.hpp"
#include "engine/core/batch_packer.hpp"
#include "engine/core/block_manager.hpp"
#include "engine/core/embedding_output.hpp"
#include "engine/core/logprob_steps.hpp"
#include "engine/core/result_emitter.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/core/state_slots.hpp"
#include "engine/core/state_snapshots.hpp"
#include "engine/core/step_sampling.hpp"
#include "engine/core/stop_checker.hpp"
#include "engine/core/structured_outputs.hpp"
#include "engine/sample/sampler.hpp"
#include "engine/text/reasoning_parser.hpp"

namespace cbatch {
namespace {

// A recurrent state cannot be restored from cached K/V blocks: a hybrid model caches prefixes only with state
// snapshots to restore (state_snapshots.hpp).
bool prefix_caching(const EngineConfig& config, const KvCacheSpec& cache) {
  return config.scheduler.enable_prefix_caching && (cache.num_state_slots == 0 || cache.num_state_snapshots > 0);
}

std::unique_ptr<ReasoningParser> make_reasoning_parser(const EngineConfig& config, const Model& model) {
  if (config.reasoning_parser.empty()) return nullptr;
  return std::make_unique<ReasoningParser>(config.reasoning_parser, *model.tokenizer);
}

// One run's state: the live sequences, the scheduler and block manager of this run, and its counters.
class EngineRun {
 public:
  EngineRun(const EngineConfig& config, const Model& model, Backend& backend, const KvCacheSpec& cache,
            const KvGroups& groups, RequestSource& source, ResultSink& sink, const EngineHooks& hooks)
      : config_(config), model_(model), backend_(backend), source_(source), hooks_(hooks), results_(sink, stats_),
        reasoning_(make_reasoning_parser(config, model)), structured_(model, reasoning_.get()),
        blocks_(cache.num_blocks, cache.block_size, prefix_caching(config, cache), groups.windows()),
        groups_(groups), slots_(cache.num_state_slots),
        snapshots_(blocks_.caching() ? cache.num_state_snapshots : 0, cache.num_state_slots),
        scheduler_(make_scheduler(config.scheduler, blocks_, &slots_, &snapshots_)),
        admission_(config, model, backend, blocks_, slots_, *scheduler_, live_, results_, structured_),
        sampling_(config, model, backend, structured_),
        cost_model_(model.config, backend.traits().weight_bytes_per_param, backend.traits().kv_bytes_per_elem,
                    backend.traits().expert_bytes_per_param) {
    if (reasoning_) results_.set_reasoning_parser(reasoning_.get());
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
    summary.state_slot_bytes = backend_.state_slot_bytes();
    summary.weight_bytes = backend_.traits().weight_bytes;
    summary.state_slots_total = slots_.num_slots();
    summary.kv_group_windows = groups_.windows();
    summary.kv_layers_per_block = groups_.layers_per_page;
    summary.kv_block_bytes = backend_.kv_block_bytes(blocks_.block_size());
    summary.peak_kv_group_blocks.resize(summary.kv_group_windows.size(), 0);
    summary.prefix_caching_off_for_state = config_.scheduler.enable_prefix_caching && !blocks_.caching();
    summary.state_snapshots_total = snapshots_.num_snapshots();
    summary.state_snapshots_evicted = snapshots_.num_evictions();
    if (!summary.interrupted && blocks_.num_free() != blocks_.num_blocks()) {
      throw Error("internal error: " + std::to_string(blocks_.num_used()) + " KV blocks not returned at the end of the run");
    }
    if (!summary.interrupted && slots_.num_used() != 0) {
      throw Error("internal error: " + std::to_string(slots_.num_used()) + " state slots not returned at the end of the run");
    }
    if (!summary.interrupted && (snapshots_.num_pinned() != 0 ||
                                 snapshots_.num_free() + snapshots_.num_registered() != snapshots_.num_snapshots())) {
      throw Error("internal error: state snapshots lost or still pinned at the end of the run (" +
                  std::to_string(snapshots_.num_pinned()) + " pinned, " + std::to_string(snapshots_.num_free()) +
                  " free, " + std::to_string(snapshots_.num_registered()) + " cached of " +
                  std::to_string(snapshots_.num_snapshots()) + ")");
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
      admission_.admit(std::move(std::get<Request>(item)));
    }
  }

  void step() {
    const int64_t t0 = engine_now_ns();
    const StepPlan plan = scheduler_->schedule();
    if (plan.empty()) throw Error("internal error: the scheduler could not schedule any work");
    kv_blocks_in_step_ = blocks_.num_used();
    group_blocks_in_step_.resize(static_cast<size_t>(blocks_.num_groups()));
    for (int g = 0; g < blocks_.num_groups(); ++g) group_blocks_in_step_[static_cast<size_t>(g)] = blocks_.num_used_in_group(g);
    state_slots_in_step_ = slots_.num_used();
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.seq->first_step < 0) s.seq->first_step = step_;
    }
    pack_batch(plan, blocks_.block_size(), blocks_.num_groups(), batch_);
    sampling_.prepare(plan, request_);
    logprob_steps_.add_queries(plan, batch_, request_);
    result_.clear();
    const int64_t t1 = engine_now_ns();
    backend_.forward(batch_, request_, result_);
    const int64_t t2 = engine_now_ns();
    logprob_steps_.store_prompt(request_, result_);
    const int finished = commit(plan);
    for (Sequence* seq : scheduler_->on_step_done(plan)) live_.erase(seq);
    record_step(plan, {t0, t1, t2}, finished);
    ++step_;
  }

  // The step's pooled sequences (embedding requests, whole in this step, in plan order) finish with their
  // vectors; returns how many.
  int finish_embeddings(const StepPlan& plan) {
    const int dim = model_.config.pooled_width();
    int pooled = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      Sequence& seq = *s.seq;
      if (!seq.request->embedding) continue;
      if (static_cast<size_t>(pooled + 1) * dim > result_.pooled.size()) {
        throw Error("internal error: the backend pooled fewer sequences than the step computed whole");
      }
      seq.embedding = finish_embedding(&result_.pooled[static_cast<size_t>(pooled++) * dim], dim, *seq.request->embedding);
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
    sampling_.sample(plan, forked_, request_, result_, logprob_steps_);
    const std::vector<Sequence*>& rows = sampling_.rows();
    const std::vector<int32_t>& tokens = sampling_.tokens();
    logprob_steps_.make_generated(rows, tokens, request_, result_);
    for (size_t row = 0; row < rows.size(); ++row) {
      Sequence& seq = *rows[row];
      if (seq.first_token_ns == 0) seq.first_token_ns = engine_now_ns();
      if (sampling_.is_blocked(row)) {
        seq.finish_reason = FinishReason::kLength;  // no token can continue the constraint: cut, like max_tokens
      } else if (seq.request->sampling.max_tokens == 0) {
        seq.finish_reason = FinishReason::kLength;  // a prompt scored for its prompt_logprobs only
      } else {
        logprob_steps_.append_generated(row, seq);
        const size_t old_text_size = seq.text.size();
        append_token(seq, tokens[row], *model_.tokenizer);
        structured_.on_token(seq, tokens[row], old_text_size);
      }
      if (seq.is_finished()) {
        seq.finish_step = step_;
        results_.emit(seq);
        ++finished;
      }
    }
    return finished;
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
          const int seed_index = r.sampling.seed ? i : child->sample_index;  // see Admission::split_prompts
          child->rng_seed = sample_rng_seed(r.sampling.seed, config_.seed, r.id_json, seed_index);
          blocks_.share(child->block_tables);
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
    r.kv_group_blocks_in_step = group_blocks_in_step_;
    for (int g = 0; g < blocks_.num_groups(); ++g) r.kv_group_blocks.push_back(blocks_.num_used_in_group(g));
    r.waiting = scheduler_->num_waiting();
    r.finished = finished;
    r.preempted = static_cast<int>(plan.preempted.size());
    r.cached_tokens = plan.cached_tokens;
    r.prefix_hits = plan.prefix_hits;
    r.state_snapshots_restored = static_cast<int>(plan.restored_snapshots.size());
    r.state_snapshots_saved = static_cast<int>(snapshots_.num_saved() - snapshots_saved_before_);
    snapshots_saved_before_ = snapshots_.num_saved();
    r.state_snapshots_cached = snapshots_.num_registered();
    r.state_snapshots_total = snapshots_.num_snapshots();
    r.constrained_rows = sampling_.constrained_rows();
    r.mask_ms = sampling_.mask_ms();
    r.experts_touched = result_.experts_touched;
    r.embedding_seqs = batch_.num_pooled();  // the batch: the plan's finished sequences are gone by now
    for (int s : batch_.pooled_seqs) r.embedding_tokens += batch_.query_start[s + 1] - batch_.query_start[s];
    r.kv_blocks_cached = blocks_.num_cached();
    r.state_slots_used = state_slots_in_step_;
    r.state_slots_total = slots_.num_slots();
    r.state_bytes = static_cast<int64_t>(state_slots_in_step_) * backend_.state_slot_bytes();
    if (hooks_.peaks.valid()) {
      const StepCost cost = cost_model_.step_cost(batch_, result_.experts_touched);
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
  StructuredOutputs structured_;
  BlockManager blocks_;
  const KvGroups& groups_;
  StateSlots slots_;  // recurrent-state slots (none without recurrent layers)
  StateSnapshots snapshots_;  // their snapshots for the prefix cache (none without caching or recurrent layers)
  std::unique_ptr<Scheduler> scheduler_;
  SequenceTable live_;
  Admission admission_;
  StepSampling sampling_;
  std::vector<std::pair<Sequence*, int32_t>> forked_;  // samples forked this step, with their parent's row
  RaggedBatch batch_;
  StepRequest request_;  // what this step asks of the backend
  StepResult result_;    // what it returned
  CostModel cost_model_;
  int64_t start_ns_ = 0;
  int64_t step_ = 0;
  int kv_blocks_in_step_ = 0;  // blocks in use after this step's schedule()
  std::vector<int> group_blocks_in_step_;  // (KV groups) likewise, per group
  int state_slots_in_step_ = 0;  // state slots held after this step's schedule()
  int64_t snapshots_saved_before_ = 0;  // snapshots saved before this step's end
  bool source_done_ = false;
};

// A hybrid model's state slots: one per sequence a step may hold (--max-num-seqs), as many as fit the memory
// the backend gives them; 0 without recurrent layers. A backend that cannot run recurrent layers is refused.
int recurrent_layers(const ModelConfig& c) {
  int n = 0;
  for (int l = 0; l < c.num_layers; ++l) n += c.is_recurrent(l);
  return n;
}

// With prefix caching on a backend that keeps them, the same memory holds the state snapshots: --state-snapshots
// N, or a quarter of the slots that fit (default_snapshot_share; more when the running slots leave more), at most
// one per KV block.
struct StateCounts {
  int slots = 0;
  int snapshots = 0;
};

StateCounts state_counts(const EngineConfig& config, const Model& model, const Backend& backend, int num_blocks) {
  const ModelConfig& c = model.config;
  if (!c.has_recurrent_layers()) return {};
  const BackendTraits& traits = backend.traits();
  if (!traits.runs_recurrent_layers) {
    throw Error("the " + traits.device_name + " backend does not run recurrent layers, and " + c.architecture +
                " is a hybrid model (" + std::to_string(recurrent_layers(c)) + " of its " +
                std::to_string(c.num_layers) + " layers are recurrent); use --device cpu");
  }
  const int64_t fit = backend.max_state_slots();
  if (fit < 1) {
    throw Error("no room for one sequence's recurrent state (" + std::to_string(backend.state_slot_bytes()) +
                " bytes) on " + traits.device_name);
  }
  const bool caching = config.scheduler.enable_prefix_caching && traits.keeps_state_snapshots;
  if (config.state_snapshots > 0 && !caching) {
    throw Error("--state-snapshots " + std::to_string(config.state_snapshots) + ": " +
                (traits.keeps_state_snapshots ? std::string("prefix caching is off")
                                              : "the " + traits.device_name + " backend keeps no state snapshots"));
  }
  if (config.state_snapshots >= 0) {
    if (config.state_snapshots > fit - 1) {
      throw Error("--state-snapshots " + std::to_string(config.state_snapshots) +
                  ": the memory for recurrent states holds " + std::to_string(fit) + " slots of " + std::to_string(backend.state_slot_bytes()) +
                  " bytes, and one is needed for a running sequence");
    }
    return {static_cast<int>(std::min<int64_t>(fit - config.state_snapshots, config.scheduler.max_num_seqs)),
            config.state_snapshots};
  }
  const int64_t reserved = caching ? default_snapshot_share(fit) : 0;
  const int64_t slots = std::min<int64_t>(fit - reserved, config.scheduler.max_num_seqs);
  const int64_t snapshots = caching ? std::min<int64_t>(fit - slots, num_blocks) : 0;
  return {static_cast<int>(slots), static_cast<int>(snapshots)};
}

// The pool's blocks (pages of one KV group's layers): --kv-cache-blocks, or the blocks --kv-cache-memory holds,
// or enough for every sequence slot at full context (every group's blocks; a windowed group's only what its
// window spans, except in a static batch), never more than the backend's memory allows.
int kv_pool_blocks(const EngineConfig& config, const Model& model, const Backend& backend, const KvGroups& groups) {
  const int block_size = config.scheduler.block_size;
  const int64_t limit = backend.max_kv_blocks(block_size);
  const std::string device = backend.traits().device_name;
  if (config.kv_cache_blocks > 0) {
    if (config.kv_cache_blocks > limit) {
      throw Error("--kv-cache-blocks " + std::to_string(config.kv_cache_blocks) + " exceeds the " +
                  std::to_string(limit) + " blocks that fit the " + device + " memory");
    }
    return config.kv_cache_blocks;
  }
  if (config.kv_cache_memory_bytes > 0) {
    const int64_t block_bytes = backend.kv_block_bytes(block_size);
    const int64_t blocks = config.kv_cache_memory_bytes / block_bytes;
    const std::string what = "--kv-cache-memory " + std::to_string(config.kv_cache_memory_bytes) + " bytes holds " +
                             std::to_string(blocks) + " KV blocks of " + std::to_string(block_bytes) + " bytes";
    if (blocks < 1) throw Error(what + ": not one");
    if (blocks > limit) throw Error(what + ", more than the " + std::to_string(limit) + " that fit the " + device + " memory");
    return static_cast<int>(blocks);
  }
  // A static batch reserves every group's blocks of its whole requests; the others slide their windows.
  const int64_t context = model.config.max_context;
  const int64_t per_seq = config.scheduler.mode == Mode::kStatic
                              ? groups.num_groups() * ((context + block_size - 1) / block_size)
                              : groups.pages_for_tokens(context, block_size, config.scheduler.max_num_batched_tokens);
  return static_cast<int>(std::min<int64_t>({limit, per_seq * config.scheduler.max_num_seqs, INT32_MAX}));
}

}  // namespace

Engine::Engine(const EngineConfig& config, const Model& model, Backend& backend)
    : config_(config), model_(model), backend_(backend), groups_(kv_groups(model.config)) {
  cache_.block_size = config.scheduler.block_size;
  cache_.num_blocks = kv_pool_blocks(config, model, backend, groups_);
  if (cache_.num_blocks <= 0) throw Error("no room for a KV cache on " + backend.traits().device_name);
  const StateCounts states = state_counts(config, model, backend, cache_.num_blocks);
  cache_.num_state_slots = states.slots;
  cache_.num_state_snapshots = states.snapshots;
  backend.allocate_kv_cache(cache_);
}

RunSummary Engine::run(RequestSource& source, ResultSink& sink, const EngineHooks& hooks) {
  EngineRun run(config_, model_, backend_, cache_, groups_, source, sink, hooks);
  return run.run();
}

}  // namespace cbatch
