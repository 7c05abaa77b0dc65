// SIGINT/SIGTERM handling for run: the first signal asks the engine to stop admitting and finish the
// current step (so finished work is flushed and the summary written); a second one exits at once.
#pragma once
#include <atomic>

namespace cbatch {

// Installs the handlers; returns the flag they set (the signal number, 0 while none came).
const std::atomic<int>& install_stop_signals();

}  // namespace cbatch
