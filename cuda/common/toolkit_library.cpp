// open_toolkit_library(): dlopen by soname, then in the build's toolkit directory.
#include "cuda/common/toolkit_library.hpp"

#include <dlfcn.h>

#include <vector>

namespace cbatch {

void* open_toolkit_library(const std::string& soname, const std::string& what) {
  std::vector<std::string> paths{soname};
#ifdef CBATCH_CUBLAS_DIR
  paths.push_back(std::string(CBATCH_CUBLAS_DIR) + "/" + soname);
#endif
  std::string errors;
  for (const std::string& path : paths) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* message = dlerror();
    errors += "\n  " + (message != nullptr ? std::string(message) : path + ": not found");
  }
  throw Error("cannot load " + what + ", which the CUDA backend needs (install the CUDA Toolkit's " + what +
              " or add its directory to LD_LIBRARY_PATH):" + errors);
}

void* find_toolkit_symbol(void* handle, const char* name) { return dlsym(handle, name); }

}  // namespace cbatch
