// Opening a CUDA Toolkit shared library at run time (cuBLAS, cuBLASLt) and resolving its functions:
// cbatch links neither, so CPU runs, `tokenize` and `inspect` never pay for loading them.
#pragma once
#include <string>

#include "engine/base/error.hpp"

namespace cbatch {

// dlopen of `soname` (LD_LIBRARY_PATH, the loader's cache), then of the same name in the toolkit directory
// found when cbatch was built. Throws cbatch::Error naming `what` and every loader message. The handle
// is never closed: what it creates lives until the process exits.
void* open_toolkit_library(const std::string& soname, const std::string& what);

// The address of `name` in `handle`, or nullptr.
void* find_toolkit_symbol(void* handle, const char* name);

// fn = the function `name` of library `what`; throws cbatch::Error when the library lacks it.
template <typename Fn>
void resolve_toolkit_function(void* handle, const std::string& what, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(find_toolkit_symbol(handle, name));
  if (fn == nullptr) {
    throw Error(what + " lacks the function " + name + " (is it older than the CUDA Toolkit cbatch was built with?)");
  }
}

}  // namespace cbatch

// A library's name may be a macro for its versioned symbol (cublasCreate is cublasCreate_v2): stringify the
// expansion, so the symbol looked up is the one whose declaration gave the member its type.
#define CBATCH_SYMBOL_NAME(name) CBATCH_SYMBOL_NAME_EXPANDED(name)
#define CBATCH_SYMBOL_NAME_EXPANDED(name) #name
