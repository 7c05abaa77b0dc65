// Test helpers for the libraries cbatch opens at run time (cuBLAS, cuBLASLt): whether one is in the
// process yet, and whether a resolved function pointer is set (doctest cannot print a function pointer).
#pragma once
#include <dlfcn.h>

#include <string>

namespace cbatch::test {

// True when the shared object `soname` is already loaded; loads nothing.
inline bool library_in_process(const std::string& soname) {
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);  // drops only the reference RTLD_NOLOAD added
  return handle != nullptr;
}

template <typename Fn>
bool resolved(Fn fn) {
  return fn != nullptr;
}

}  // namespace cbatch::test
