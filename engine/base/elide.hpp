// Bounded quotes: an error message quotes at most about kQuoteBytes bytes of any input or generated
// text (a prompt, a regex, a schema, an id, a file path), so a line of a megabyte still gets an error
// line of a few hundred bytes. Every message that embeds such text passes it through elide(); the
// places that print whole messages (error lines, the fatal message on stderr) bound them again with
// kMessageBytes, in case a message embeds several quotes.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace cbatch {

inline constexpr size_t kQuoteBytes = 200;     // the most of one input's text a message quotes
inline constexpr size_t kMessageBytes = 1000;  // the most of one whole message

// `text` unchanged when it has at most `max_bytes` bytes; otherwise its first `max_bytes` bytes, cut
// back to the start of a UTF-8 character, followed by "... (N bytes)" with N the full length.
std::string elide(std::string_view text, size_t max_bytes = kQuoteBytes);

}  // namespace cbatch
