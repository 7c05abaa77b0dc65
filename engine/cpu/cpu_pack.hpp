// Model tensors into the CPU backend's kept forms: the rows of several tensors stacked into one matrix (a
// fused product: q|k|v, gate|up) and packed for matmul, keeping their GGUF blocks where they share a block
// type (else expanded to fp32, or int8 panels per part), dummy tensors generated straight into their
// blocks; or the values of vectors end to end in fp32.
#pragma once
#include <vector>

#include "engine/cpu/cpu_matmul.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

class ThreadPool;

// How block-type weights are packed: kept in their blocks (else expanded to fp32), and then as int8 panels
// for the 8-bit product (--cpu-precision fast), a 5- or 6-bit type's in planes or not (int8_planes).
struct Packing {
  bool keep_blocks = true;
  bool int8 = false;
  bool planes = false;
};

// Rows of the parts stacked (rows summed, cols shared) and packed for matmul, converted panel by panel
// across the pool (the packed layout is the only copy made).
PackedMatrix pack_stacked(const std::vector<const TensorView*>& parts, ThreadPool& pool, Packing packing);

// The parts' values end to end in fp32 (vectors: a fused product's biases).
std::vector<float> stack_values(const std::vector<const TensorView*>& parts);

}  // namespace cbatch
