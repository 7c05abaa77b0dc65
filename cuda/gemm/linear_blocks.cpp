// The rule of which linear weights stay in their blocks (linear_blocks.hpp), and the load note that reports it.
#include "cuda/gemm/linear_blocks.hpp"

#include <string_view>

#include "cuda/moe/moe_quant_gemm.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch {

LinearBlocksChoice linear_blocks_choice(const std::vector<const TensorView*>& parts, int64_t k) {
  LinearBlocksChoice choice;
  if (parts.empty()) return choice;
  bool any_blocks = false;
  for (const TensorView* p : parts) any_blocks = any_blocks || is_block_type(p->dtype);
  if (!any_blocks) return choice;  // a plain weight: nothing to keep
  const DType dtype = parts.front()->dtype;
  for (const TensorView* p : parts) {
    if (p->dtype != dtype) {
      choice.reason = "its parts are in " + std::string(dtype_name(dtype)) + " and " +
                      std::string(dtype_name(p->dtype)) + " ('" + p->name + "')";
      return choice;
    }
  }
  if (!expert_blocks_supported(dtype, k)) {
    choice.reason =
        std::string(dtype_name(dtype)) + " with k = " + std::to_string(k) + " is not read by the block GEMM";
    return choice;
  }
  for (const TensorView* p : parts) {
    if (p->input_order != nullptr) {
      choice.reason = "'" + p->name + "' has permuted (act-order) inputs";
      return choice;
    }
    if (p->is_random && dtype != DType::kMXFP4) {
      choice.reason = "random " + std::string(dtype_name(dtype)) + " weights are generated in the compute dtype";
      return choice;
    }
  }
  choice.blocks = true;
  choice.dtype = dtype;
  return choice;
}

void LinearBlocksTally::add(const std::string& name, const LinearBlocksChoice& choice) {
  if (choice.blocks) {
    ++blocks_[std::string(dtype_name(choice.dtype))];
  } else if (!choice.reason.empty()) {
    decoded_.push_back("'" + name + "' (" + choice.reason + ")");
  }
}

std::string LinearBlocksTally::note(const std::string& compute) const {
  if (blocks_.empty() && decoded_.empty()) return "";
  std::string kept;
  for (const auto& [type, count] : blocks_) kept += (kept.empty() ? "" : ", ") + std::to_string(count) + " " + type;
  std::string note = "linear weights kept in their blocks: " + (kept.empty() ? std::string("none") : kept);
  if (decoded_.empty()) return note;
  note += "; " + std::to_string(decoded_.size()) + " decoded to " + compute + ": ";
  constexpr size_t kNamed = 3;
  for (size_t i = 0; i < decoded_.size() && i < kNamed; ++i) note += (i > 0 ? ", " : "") + decoded_[i];
  if (decoded_.size() > kNamed) note += ", ...";
  return note;
}

}  // namespace cbatch
