// A property of every model a model-file fuzz target loads: each weight view is whole, as a backend reads
// it. Every stored row is converted to fp32 (every byte of the view read, so a view past its file's end or
// its buffer is a sanitizer report or a SIGBUS), and an act-order view's input_order is a permutation of its
// columns (a value out of range would write past the row).
#pragma once
#include <string>
#include <vector>

#include "engine/model/model.hpp"
#include "fuzz_support.hpp"

namespace cbatch::fuzz {

inline void read_whole(const TensorView& view) {
  if (view.empty() || view.is_random || view.rows == 0 || view.cols == 0) return;
  if (view.input_order != nullptr) {
    std::vector<char> seen(static_cast<size_t>(view.cols), 0);
    for (int64_t j = 0; j < view.cols; ++j) {
      const int32_t input = view.input_order[j];
      require(input >= 0 && input < view.cols && !seen[static_cast<size_t>(input)],
              "input_order is a permutation of the columns", view.name);
      seen[static_cast<size_t>(input)] = 1;
    }
  }
  std::vector<float> row(static_cast<size_t>(view.cols));
  for (int64_t r = 0; r < view.rows; ++r) tensor_rows_to_f32(view, r, 1, row.data());
}

template <typename Tensors>
void read_every_view(const Tensors& tensors) {
  for (const TensorView& view : tensors.items) read_whole(view);
}

inline void read_every_tensor(const Model& model) {
  const ModelTensors& tensors = expect_tensors(model);
  read_every_view(tensors);
  for (const LayerTensors& layer : tensors.layers) {
    read_every_view(layer);
    for (const ExpertTensors& expert : layer.experts) read_every_view(expert);
  }
}

}  // namespace cbatch::fuzz
