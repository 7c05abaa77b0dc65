// A model's tensors handed to the CPU backend (take_tensors): the buffers the loader made (here: blocks with
// their owner, as a pre-quantized checkpoint's) are freed once packed, a buffer the backend still reads (the
// embedding table, tied to the lm_head) lives as long as the backend, the logits are those of a backend
// built from copies of the views, and the model refuses to give its tensors twice.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "ragged_steps.hpp"
#include "test_blocks.hpp"
#include "test_model_fixture.hpp"

using namespace cbatch;

namespace {

// t becomes random blocks of `dtype` in a buffer only its views hold; returns that buffer.
std::weak_ptr<const void> own_blocks(TensorView& t, DType dtype, unsigned seed) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(testing::random_blocks(dtype, t.rows, t.cols, seed));
  t = testing::blocks_view(*bytes, dtype, t.rows, t.cols);
  t.owner = bytes;
  return bytes;
}

}  // namespace

TEST_CASE("tensors taken by the CPU backend: the loader's blocks freed once packed, the embedding kept") {
  for (bool fast : {false, true}) {
    CAPTURE(fast);
    testing::TestModelShape shape;
    shape.dim = 64;
    shape.hidden = 128;
    shape.tied = true;
    Model model = testing::make_test_model(shape);
    std::vector<std::weak_ptr<const void>> packed;
    unsigned seed = 1;
    for (LayerTensors& l : model.tensors.layers) {
      for (LayerTensor kind : {LayerTensor::kWq, LayerTensor::kWk, LayerTensor::kWv, LayerTensor::kWo}) {
        packed.push_back(own_blocks(l[kind], DType::kFP8, seed++));
      }
      for (LayerTensor kind : {LayerTensor::kGate, LayerTensor::kUp, LayerTensor::kDown}) {
        packed.push_back(own_blocks(l[kind], DType::kQ4_0, seed++));
      }
    }
    const std::weak_ptr<const void> embedding =
        own_blocks(model.tensors[ModelTensor::kEmbedding], DType::kQ8_0, seed++);
    model.tensors[ModelTensor::kLmHead] = model.tensors[ModelTensor::kEmbedding];

    CpuBackendOptions options;
    options.int8_products = fast;
    std::unique_ptr<Backend> copied = make_cpu_backend(model, options);
    for (const auto& buffer : packed) CHECK(!buffer.expired());  // the model still holds its views
    std::unique_ptr<Backend> taken = make_cpu_backend(model, take_tensors(model), options);
    for (const auto& buffer : packed) CHECK(buffer.expired());
    CHECK(!embedding.expired());  // the backend's embedding table
    CHECK(model.tensors_taken);
    CHECK(model.tensors.layers.empty());
    CHECK_THROWS_WITH_AS(make_cpu_backend(model, options), doctest::Contains("handed to a backend"), Error);
    CHECK_THROWS_WITH_AS(take_tensors(model), doctest::Contains("handed to a backend"), Error);

    const std::vector<float> want = testing::two_prompts_then_decode(*copied);
    const std::vector<float> got = testing::two_prompts_then_decode(*taken);
    REQUIRE(want.size() == 3 * static_cast<size_t>(shape.vocab));
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    copied.reset();
    CHECK(!embedding.expired());
    taken.reset();
    CHECK(embedding.expired());
  }
}
