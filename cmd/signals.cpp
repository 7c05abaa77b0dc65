// The handler only sets an atomic flag and writes a fixed message (both async-signal-safe); _exit on a
// second signal skips destructors and stdio buffers, which is safe because every output line has
// already been written whole with write() (the writer blocks these signals while it writes one).
#include "cmd/signals.hpp"

#include <csignal>
#include <unistd.h>

namespace cbatch {
namespace {

std::atomic<int> g_stop_signal{0};  // written only by the signal handler (async-signal-safe atomic)

void on_signal(int sig) {
  if (g_stop_signal.exchange(sig) != 0) _exit(128 + sig);
  static const char kMessage[] = "\n[cbatch] stopping: finishing the current step (signal again to exit at once)\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
}

}  // namespace

const std::atomic<int>& install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // reads and writes go on; the engine polls the flag between steps
  // The other stop signal waits while the handler runs, so a second signal that comes at once still
  // finds the stopping message written before it exits.
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return g_stop_signal;
}

}  // namespace cbatch
