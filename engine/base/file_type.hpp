// What a path names, for refusals that say why: a regular file, a directory, a device, a named pipe.
// A path is judged by what it names (stat follows symlinks), so a link to a regular file is a regular file.
// Readers that read a file twice (a fingerprint, then the lines) or to its end before the run starts, and
// writers that replace a file whole, accept only regular files: a named pipe would hand its bytes to the
// first read only (or wait for a writer forever), a device would never end or would be destroyed.
#pragma once
#include <string>
#include <sys/types.h>

namespace cbatch {

// "a regular file", "a directory", "a character device", "a block device", "a named pipe (FIFO)",
// "a socket", "a symlink" (from an lstat), for an st_mode.
std::string file_type_name(mode_t mode);

// Whether the path names an existing regular file.
bool is_regular_file(const std::string& path);

// Whether both paths name the same existing regular file, however spelled (./a, a symlink, a hard link).
bool is_same_regular_file(const std::string& a, const std::string& b);

// Returns whether the path names an existing regular file; false when it does not exist (the caller
// creates it, or its open reports why not). Throws cbatch::Error "WHY: 'PATH' is a named pipe (FIFO),
// not a regular file" when it names something else.
bool require_regular_file(const std::string& path, const std::string& why);

}  // namespace cbatch
