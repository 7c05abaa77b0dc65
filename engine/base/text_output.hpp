// Checked text output: a small file written whole (a summary, a bench report) and standard output at
// the end of a command. A write that fails (a full disk, a closed pipe, a quota) is an error that names
// the path, or "standard output", never a silent short file: stdio and iostreams report ENOSPC only when
// their buffer is flushed, often at a close nobody checks, so every step here is checked.
#pragma once
#include <string>
#include <string_view>

namespace cbatch {

// Creates or truncates `path` and writes `text` to it; open, every write and close are checked. Any path
// open(2) accepts: /dev/null, a named pipe (waits for its reader). Throws cbatch::Error
// "cannot write 'PATH': REASON".
void write_text_file(const std::string& path, std::string_view text);

// fflush(stdout), then its error flag: throws cbatch::Error "cannot write standard output: REASON" when
// this or an earlier write to stdout failed.
void flush_standard_output();

}  // namespace cbatch
