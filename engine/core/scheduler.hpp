// Schedulers decide, step by step, which sequences run and with how many tokens. Continuous batching
// (also used, with one sequence, for sequential mode) and classic static batching share this interface
// so the engine loop is the same for every mode.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "engine/core/block_manager.hpp"
#include "engine/core/engine_config.hpp"
#include "engine/core/step_plan.hpp"

namespace cbatch {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues a new sequence (its prompt in tokens, nothing computed, no blocks).
  virtual void add(Sequence* seq) = 0;
  virtual StepPlan schedule() = 0;
  // The engine calls this after the step's tokens are appended and stop conditions checked; finished
  // sequences leave the batch (continuous) or hold their slot until the batch ends (static). Returns the
  // sequences the scheduler no longer references (their blocks freed): the engine may delete them.
  virtual std::vector<Sequence*> on_step_done(const StepPlan& plan) = 0;
  virtual int num_waiting() const = 0;
  virtual int num_running() const = 0;
  bool has_work() const { return num_waiting() + num_running() > 0; }
};

std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config, BlockManager& blocks);

}  // namespace cbatch
