// Admission: a request from the source becomes the sequences the scheduler runs. A line of several
// prompts becomes one sequence per prompt (sharing one group of samples), an embedding request one per
// input (gathered by their EmbeddingGroup), and every sequence of a request shares the request itself. A
// request runs only if all its sequences can (context, KV cache, sequence cap, constraint, backend): else
// it becomes one error line. A request with nothing to compute finishes at once.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/core/block_manager.hpp"
#include "engine/core/engine_config.hpp"
#include "engine/core/result_emitter.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/core/state_slots.hpp"
#include "engine/core/structured_outputs.hpp"

namespace cbatch {

class Admission {
 public:
  Admission(const EngineConfig& config, const Model& model, const Backend& backend, BlockManager& blocks,
            const StateSlots& slots, Scheduler& scheduler, SequenceTable& live, ResultEmitter& results,
            StructuredOutputs& structured)
      : config_(config), model_(model), backend_(backend), blocks_(blocks), slots_(slots), scheduler_(scheduler),
        live_(live), results_(results), structured_(structured) {}

  void admit(Request&& request);

 private:
  std::string embedding_refusal(const Request& request) const;
  void admit_embedding(Request&& request);
  std::vector<std::unique_ptr<Sequence>> split_prompts(Request&& request);
  std::unique_ptr<Sequence> make_sequence(std::shared_ptr<const Request> request, std::vector<int32_t> prompt);
  std::string prepare(Sequence& seq);
  void start(std::unique_ptr<Sequence> seq);

  const EngineConfig& config_;
  const Model& model_;
  const Backend& backend_;
  BlockManager& blocks_;
  const StateSlots& slots_;
  Scheduler& scheduler_;
  SequenceTable& live_;
  ResultEmitter& results_;
  StructuredOutputs& structured_;
};

}  // namespace cbatch
