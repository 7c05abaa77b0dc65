#include "engine/core/lora_rotation.hpp"

#include <algorithm>

namespace cbatch {

void LoraRotation::set_running(const std::vector<int>& running_loras) {
  auto is_running = [&](int id) { return std::find(running_loras.begin(), running_loras.end(), id) != running_loras.end(); };
  std::erase_if(active_, [&](int id) { return !is_running(id); });
  if (!is_running(draining_)) draining_ = 0;
  for (int id : running_loras) {  // a preempted-then-readmitted or forked sequence's adapter is active again
    if (id != 0 && std::find(active_.begin(), active_.end(), id) == active_.end()) active_.push_back(id);
  }
}

bool LoraRotation::may_admit(int lora) {
  if (lora == 0) return true;
  if (std::find(active_.begin(), active_.end(), lora) != active_.end()) return lora != draining_;
  if (static_cast<int>(active_.size()) >= max_loras_) return false;
  active_.push_back(lora);
  return true;
}

void LoraRotation::note_blocked(int lora) {
  if (lora == 0 || draining_ != 0 || active_.empty()) return;
  draining_ = active_.front();
}

}  // namespace cbatch
