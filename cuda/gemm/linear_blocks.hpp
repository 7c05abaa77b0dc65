// Which linear weights the CUDA backend keeps in the blocks the model holds them in (--cuda-kernel
// weights=blocks, linear.hpp): a weight made of parts (q|k|v of three tensors, gate|up of two) stays in blocks
// when every part is stored in one block type that the quant GEMM reads with the weight's k inputs
// (expert_blocks_supported: MXFP4, the 32-element types, FP8, NVFP4, Q4_K/Q5_K/Q6_K), none has permuted inputs
// (an act-order checkpoint's: the decoded path puts them back in order) and none is random (a dummy model's
// values are generated in T; random MXFP4 tensors are generated as blocks). Any other weight is decoded to T at
// load, as with weights=dequant, and the load notes say which and why. Host code.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/model/tensor.hpp"

namespace cbatch {

struct LinearBlocksChoice {
  bool blocks = false;
  DType dtype = DType::kF32;  // the parts' block type when blocks
  std::string reason;         // why not, for a weight with a part in blocks; empty for a plain (F16, BF16...) weight
};

LinearBlocksChoice linear_blocks_choice(const std::vector<const TensorView*>& parts, int64_t k);

// The count of each kind of linear weight of a load, for its notes.
class LinearBlocksTally {
 public:
  // Weight `name` (its first part's tensor) was kept as `choice` says.
  void add(const std::string& name, const LinearBlocksChoice& choice);
  // A note for the load line: how many linear weights stay in which blocks, and the first few decoded to T with
  // their reason; empty when no weight has a part in blocks. `compute` names T ("bf16").
  std::string note(const std::string& compute) const;

 private:
  std::map<std::string, int> blocks_;   // block type name -> weights kept in it
  std::vector<std::string> decoded_;    // "'name' (reason)" of the weights decoded to T
};

}  // namespace cbatch
