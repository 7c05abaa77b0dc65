// Static batching, the classic padded batch, kept honest so that its cost can be compared.
// Up to B = min(max_num_seqs, max_num_batched_tokens) waiting sequences form a batch, each reserving the
// KV blocks of its whole request up front. Prompt phase: every prompt is padded to the longest one and
// the padded (B x longest) block is computed column chunk by column chunk within the token budget;
// a sequence whose prompt is shorter computes padding rows. Decode phase: every step computes one row
// per slot until the slowest sequence finishes; finished slots keep computing (padding rows) and no new
// sequence joins until the whole batch is done. With prefix caching, a sequence starts after its cached
// prefix; the prompt phase starts at the first column some member of the batch still has to compute.
// A request with n > 1 takes n slots; its samples join the batch when its prompt is done, sharing its
// reserved blocks, and the blocks they will need of their own (copy-on-write of every shared block they
// write) are set aside when the batch is formed, so a formed batch always runs to its end. A batch holds
// sequences of at most max_loras LoRA adapters: others are passed over and wait (the oldest waiting
// sequence always joins, so every adapter gets its batch). A hybrid model's sequences hold a state slot
// each (state_slots.hpp), taken when the batch is formed (its samples' too: a batch of more samples than
// slots is not formed) and given back when it ends; a forked sample takes one with a copy of its parent's.
// With prefix caching, a hybrid model's sequence restores a state snapshot at its cached prefix's end and saves
// its state at its snapshot points (state_snapshots.hpp): a column chunk ends at the next point of any member.
// KV groups: a sequence reserves every group's blocks of its whole request (a windowed group's too: a static
// batch frees nothing before it ends, as it always did), all counted against the one pool.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

#include "engine/base/error.hpp"
#include "engine/core/scheduler.hpp"

namespace cbatch {
namespace {

class StaticScheduler final : public Scheduler {
 public:
  StaticScheduler(const SchedulerConfig& config, BlockManager& blocks, StateSlots* slots, StateSnapshots* snapshots)
      : config_(config), blocks_(blocks), slots_(slots != nullptr && slots->in_use() ? slots : nullptr),
        snapshots_(slots_ != nullptr && snapshots != nullptr && snapshots->in_use() ? snapshots : nullptr) {}

  void add(Sequence* seq) override { waiting_.push_back(seq); }
  void add_forked(Sequence* seq) override {
    seq->admit_order = next_admit_order_++;
    if (slots_ != nullptr) {
      seq->state_slot = slots_->fork(seq->state_slot);  // the parent's slot until now
      if (seq->state_slot < 0) throw Error("internal error: no state slot for a forked sample");
    }
    batch_.push_back(seq);
  }
  int num_waiting() const override { return static_cast<int>(waiting_.size()); }
  int num_running() const override { return static_cast<int>(batch_.size()); }

  StepPlan schedule() override {
    StepPlan plan;
    if (batch_.empty()) form_batch(plan);
    if (batch_.empty()) return plan;
    if (next_column_ < longest_prompt_) {
      plan_prompt_columns(plan);
    } else {
      plan_decode(plan);
    }
    if (slots_ != nullptr) plan.state_copies = slots_->take_copies();
    return plan;
  }

  std::vector<Sequence*> on_step_done(const StepPlan& plan) override {
    for (const ScheduledSeq& s : plan.seqs) {
      blocks_.commit_full_blocks(s.seq->tokens, s.seq->num_computed, s.seq->block_tables, s.seq->block_hashes,
                                 root_block_hash(s.seq->request->lora_id));
    }
    if (snapshots_ != nullptr) save_snapshots(plan, blocks_, *slots_, *snapshots_);
    const bool all_done = std::all_of(batch_.begin(), batch_.end(), [](const Sequence* s) { return s->is_finished(); });
    if (!all_done) return {};
    for (Sequence* seq : batch_) {
      blocks_.release(seq->block_tables, &seq->block_hashes);
      if (slots_ != nullptr) slots_->release(std::exchange(seq->state_slot, -1));
    }
    reserved_ = 0;
    return std::exchange(batch_, {});
  }

 private:
  int batch_capacity() const { return std::min(config_.max_num_seqs, config_.max_num_batched_tokens); }

  void form_batch(StepPlan& plan) {
    longest_prompt_ = 0;
    next_column_ = INT32_MAX;
    int slots = 0;
    std::vector<int> loras;  // the batch's adapters: at most max_loras; others wait for a later batch
    size_t i = 0;
    while (i < waiting_.size() && slots + waiting_[i]->pending_samples <= batch_capacity() &&
           (slots_ == nullptr || slots + waiting_[i]->pending_samples <= slots_->num_slots())) {
      Sequence* seq = waiting_[i];
      const int lora = seq->request->lora_id;
      if (lora != 0 && std::find(loras.begin(), loras.end(), lora) == loras.end()) {
        if (static_cast<int>(loras.size()) >= config_.max_loras) {
          ++i;
          continue;
        }
        loras.push_back(lora);
      }
      const int cached = match_cached_prefix(*seq, blocks_, snapshots_);
      const int own = (seq->pending_samples - 1) * blocks_.num_groups() *
                      (blocks_.blocks_for_tokens(seq->max_total_tokens) - seq->num_prompt_tokens / blocks_.block_size());
      const int needed = blocks_.blocks_needed(seq->block_tables, seq->max_total_tokens);
      if (needed + own > blocks_.num_free() - reserved_ ||
          !blocks_.ensure_capacity(seq->block_tables, seq->max_total_tokens)) {
        unmatch_cached_prefix(*seq, blocks_, snapshots_);
        break;
      }
      reserved_ += own;
      slots += seq->pending_samples;
      if (slots_ != nullptr) seq->state_slot = slots_->allocate();  // the batch forms with every slot free
      if (snapshots_ != nullptr) restore_snapshot(*seq, *slots_, *snapshots_, plan);
      note_admitted(*seq, cached, plan);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      seq->admit_order = next_admit_order_++;
      batch_.push_back(seq);
      longest_prompt_ = std::max(longest_prompt_, seq->num_prompt_tokens);
      next_column_ = std::min(next_column_, seq->num_computed);
    }
    if (batch_.empty()) next_column_ = 0;
  }

  void plan_prompt_columns(StepPlan& plan) {
    const int width = std::max(1, config_.max_num_batched_tokens / static_cast<int>(batch_.size()));
    int end = std::min(next_column_ + width, longest_prompt_);
    for (const Sequence* seq : batch_) {  // a column chunk ends at a member's snapshot point
      const int to_point = tokens_to_snapshot(*seq, blocks_.block_size());
      if (to_point != INT_MAX && seq->num_computed + to_point > next_column_) {
        end = std::min(end, seq->num_computed + to_point);
      }
    }
    for (Sequence* seq : batch_) {
      ScheduledSeq s;
      s.seq = seq;
      s.num_tokens = std::max(0, std::min(seq->num_prompt_tokens, end) - seq->num_computed);
      s.num_padding = (end - next_column_) - s.num_tokens;
      s.is_prefill = true;
      s.samples = s.num_tokens > 0 && seq->num_computed + s.num_tokens == seq->num_prompt_tokens;
      plan.seqs.push_back(s);
    }
    next_column_ = end;
  }

  void plan_decode(StepPlan& plan) {
    for (Sequence* seq : batch_) {
      ScheduledSeq s;
      s.seq = seq;
      if (seq->is_finished()) {
        s.num_padding = 1;
      } else {
        s.num_tokens = 1;
        s.samples = true;
        const int before = blocks_.num_used();
        if (!blocks_.ensure_writable(seq->block_tables, seq->num_computed, plan.block_copies)) {
          throw Error("internal error: static batch ran out of its reserved KV blocks");
        }
        reserved_ -= blocks_.num_used() - before;  // the private copies it took
      }
      plan.seqs.push_back(s);
    }
  }

  SchedulerConfig config_;
  BlockManager& blocks_;
  StateSlots* slots_;          // nullptr: no recurrent state
  StateSnapshots* snapshots_;  // nullptr: no state snapshots (no recurrent state, or no prefix caching)
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> batch_;
  int reserved_ = 0;           // free blocks set aside for the batch's samples' copy-on-write
  int longest_prompt_ = 0;     // padded prompt length of the current batch
  int next_column_ = 0;        // first prompt column not yet computed
  int64_t next_admit_order_ = 0;
};

}  // namespace

std::unique_ptr<Scheduler> make_continuous_scheduler(const SchedulerConfig& config, BlockManager& blocks,
                                                     StateSlots* slots, StateSnapshots* snapshots);

std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config, BlockManager& blocks, StateSlots* slots,
                                          StateSnapshots* snapshots) {
  if (config.mode == Mode::kStatic) return std::make_unique<StaticScheduler>(config, blocks, slots, snapshots);
  return make_continuous_scheduler(config, blocks, slots, snapshots);
}

}  // namespace cbatch
