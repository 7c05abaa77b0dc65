// The recurrent-state slot pool (state_slots.hpp).
#include "engine/core/state_slots.hpp"

#include "engine/base/error.hpp"

namespace cbatch {

StateSlots::StateSlots(int num_slots) : num_slots_(num_slots) {
  if (num_slots < 0) throw Error("the state slot pool needs a non-negative size (got " + std::to_string(num_slots) + ")");
  held_.assign(static_cast<size_t>(num_slots), false);
  for (int s = num_slots - 1; s >= 0; --s) free_.push_back(s);  // hand out slot 0 first
}

int32_t StateSlots::allocate() {
  if (free_.empty()) return -1;
  const int32_t slot = free_.back();
  free_.pop_back();
  held_[static_cast<size_t>(slot)] = true;
  return slot;
}

void StateSlots::release(int32_t slot) {
  if (slot < 0) return;
  if (slot >= num_slots_ || !held_[static_cast<size_t>(slot)]) {
    throw Error("internal error: state slot " + std::to_string(slot) + " released but not held");
  }
  held_[static_cast<size_t>(slot)] = false;
  free_.push_back(slot);
  for (size_t i = 0; i < copies_.size();) {
    if (copies_[i + 1] == slot) {
      copies_.erase(copies_.begin() + static_cast<std::ptrdiff_t>(i), copies_.begin() + static_cast<std::ptrdiff_t>(i + 2));
    } else {
      i += 2;
    }
  }
}

int32_t StateSlots::fork(int32_t parent) {
  const int32_t slot = allocate();
  if (slot >= 0 && parent >= 0) {
    copies_.push_back(parent);
    copies_.push_back(slot);
  }
  return slot;
}

void StateSlots::add_copy(int32_t src, int32_t dst) {
  copies_.push_back(src);
  copies_.push_back(dst);
}

std::vector<int32_t> StateSlots::take_copies() {
  std::vector<int32_t> out;
  out.swap(copies_);
  return out;
}

}  // namespace cbatch
