// cublas_library(): dlopen of cuBLAS and dlsym of each function, once per process.
#include "cuda/cublas_library.hpp"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "engine/core/error.hpp"

// A cuBLAS name may be a macro for its versioned symbol (cublasCreate is cublasCreate_v2): stringify the
// expansion, so the symbol looked up is the one whose declaration gave the member its type.
#define CBATCH_SYMBOL_NAME(name) CBATCH_SYMBOL_NAME_EXPANDED(name)
#define CBATCH_SYMBOL_NAME_EXPANDED(name) #name

namespace cbatch {
namespace {

// The soname first (LD_LIBRARY_PATH, the loader's cache), then the toolkit found when cbatch was built.
std::vector<std::string> candidate_paths() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::vector<std::string> paths{soname};
#ifdef CBATCH_CUBLAS_DIR
  paths.push_back(std::string(CBATCH_CUBLAS_DIR) + "/" + soname);
#endif
  return paths;
}

void* open_cublas() {
  std::string errors;
  for (const std::string& path : candidate_paths()) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* message = dlerror();
    errors += "\n  " + (message != nullptr ? std::string(message) : path + ": not found");
  }
  throw Error("cannot load cuBLAS, which the CUDA backend needs (install the CUDA Toolkit's cuBLAS or add its "
              "directory to LD_LIBRARY_PATH):" + errors);
}

template <typename Fn>
void resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) throw Error(std::string("cuBLAS lacks the function ") + name + " (is it older than the CUDA " +
                                 "Toolkit cbatch was built with?)");
}

CublasLibrary load() {
  void* handle = open_cublas();  // never closed: the handles it creates live until the process exits
  CublasLibrary lib;
  resolve(handle, CBATCH_SYMBOL_NAME(cublasCreate), lib.create);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasDestroy), lib.destroy);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasSetStream), lib.set_stream);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasGetStream), lib.get_stream);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasSetMathMode), lib.set_math_mode);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasSetWorkspace), lib.set_workspace);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasGetStatusString), lib.status_string);
  // cublasGemmEx is overloaded in C++ (an inline wrapper takes a cudaDataType compute type); GemmExFn is
  // the exported one, which this cast would fail to compile against if its declaration changed.
  static_assert(sizeof(static_cast<CublasLibrary::GemmExFn>(&cublasGemmEx)) > 0);
  resolve(handle, CBATCH_SYMBOL_NAME(cublasGemmEx), lib.gemm_ex);
  return lib;
}

}  // namespace

const CublasLibrary& cublas_library() {
  static const CublasLibrary lib = load();  // a failed load throws and is tried again by the next call
  return lib;
}

}  // namespace cbatch
