// For tests that drive a backend step by step: a step's request and its result in one object, passed to
// Backend::forward as both (`backend->forward(batch, io, io)`), so a test sets and reads one variable.
#pragma once
#include "engine/backend/backend.hpp"

namespace cbatch {

struct StepIo : StepRequest, StepResult {};

}  // namespace cbatch
