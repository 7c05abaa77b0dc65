// open(2) for writing that a stop signal can interrupt while it waits for a named pipe's reader. Opening
// a pipe for writing waits until some process opens it for reading, as a shell redirection does; but the
// kernel's wait restarts after a signal handler installed with SA_RESTART (cmd/signals.cpp), so the first
// SIGINT/SIGTERM would be ignored there. Here the wait polls instead (every 50 ms) and looks at the flag.
#pragma once
#include <atomic>
#include <string>

namespace cbatch {

// Opens `path` with `flags` (O_WRONLY | ...; created 0644 with O_CREAT) and returns the descriptor, in
// blocking mode. -1 with errno set when the open fails, and with errno EINTR when *stop became non-zero
// while a named pipe waited for its reader (stop may be null: then it waits as long as it takes).
int open_for_writing(const std::string& path, int flags, const std::atomic<int>* stop);

}  // namespace cbatch
