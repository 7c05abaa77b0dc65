// Which LoRA adapters a step may hold (--max-loras), and the fair rotation when more adapters wait.
// Adapters are active while they have running sequences; a waiting sequence of an inactive adapter is
// admitted when an adapter slot is free. When one is blocked for lack of a slot, the oldest active adapter
// stops admitting (drains); once its running sequences finish its slot is kept for the blocked one (no
// other inactive adapter may take it), so every adapter gets its turn and none starves. Base-model sequences (adapter 0) take no slot.
#pragma once
#include <vector>

namespace cbatch {

class LoraRotation {
 public:
  explicit LoraRotation(int max_loras) : max_loras_(max_loras) {}

  // Called before a step's admissions with the adapter of each running sequence (any order, repeats).
  void set_running(const std::vector<int>& running_loras);
  // Whether a waiting sequence of this adapter may join now; a yes for an inactive adapter activates it.
  bool may_admit(int lora);
  // Whether a sequence of this adapter would find no slot now (changes nothing).
  bool is_blocked(int lora) const;
  // Called for a blocked adapter: the oldest active adapter starts draining (if none drains yet).
  void note_blocked(int lora);

  const std::vector<int>& active() const { return active_; }  // activation order, oldest first
  int draining() const { return draining_; }

 private:
  int max_loras_;
  std::vector<int> active_;
  int draining_ = 0;  // 0: none
  int promised_ = 0;  // the blocked adapter the next free slot is kept for; 0: none
};

}  // namespace cbatch
