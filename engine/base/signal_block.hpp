// Blocks SIGINT and SIGTERM on the calling thread for the object's lifetime. Threads created meanwhile
// inherit the mask, so worker threads never run the stop handler: it runs on the main thread, and a
// handler that exits at once (the second Ctrl-C) then runs only between output lines, never mid-line.
#pragma once
#include <pthread.h>
#include <signal.h>

namespace cbatch {

class StopSignalsBlocked {
 public:
  StopSignalsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~StopSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

}  // namespace cbatch
