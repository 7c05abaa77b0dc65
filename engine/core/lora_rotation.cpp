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
  const int kept = promised_ != 0 && promised_ != lora ? 1 : 0;
  if (static_cast<int>(active_.size()) + kept >= max_loras_) return false;
  if (lora == promised_) promised_ = 0;
  active_.push_back(lora);
  return true;
}

bool LoraRotation::is_blocked(int lora) const {
  if (lora == 0 || lora == promised_ || std::find(active_.begin(), active_.end(), lora) != active_.end()) return false;
  return static_cast<int>(active_.size()) + (promised_ != 0 ? 1 : 0) >= max_loras_;
}

void LoraRotation::note_blocked(int lora) {
  if (lora == 0 || draining_ != 0 || promised_ != 0 || active_.empty()) return;
  draining_ = active_.front();
  promised_ = lora;
}

}  // namespace cbatch
