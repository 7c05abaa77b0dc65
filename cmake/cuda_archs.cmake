# Which GPUs the CUDA kernels are compiled for: chosen before enable_language(CUDA), spelled out as explicit
# entries after it (what cbatch --version then reports, from the kernels' target). Entries use CMake's syntax:
# "90-real" is sm_90 machine code, "80-virtual" compute_80 PTX (the driver compiles it for the GPU at hand on
# first use and caches it), a bare "90" both, "native" the GPUs of this machine.

# The compute capabilities of the GPUs nvidia-smi lists ("90;89"), or "" when it lists none (or is absent).
function(cbatch_detect_gpu_archs out_var)
  set(archs "")
  find_program(CBATCH_NVIDIA_SMI nvidia-smi)
  if(CBATCH_NVIDIA_SMI)
    execute_process(COMMAND ${CBATCH_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" arch "${cap}")
        list(APPEND archs "${arch}")
      endforeach()
      list(REMOVE_DUPLICATES archs)
    endif()
  endif()
  set(${out_var} "${archs}" PARENT_SCOPE)
endfunction()

# The GPU architectures this nvcc can compile for ("75;80;...;120").
function(cbatch_nvcc_archs out_var)
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE listed ERROR_QUIET)
  string(REGEX MATCHALL "compute_[0-9]+" listed "${listed}")
  list(TRANSFORM listed REPLACE "compute_" "")
  set(${out_var} "${listed}" PARENT_SCOPE)
endfunction()

# Sets CMAKE_CUDA_ARCHITECTURES in the caller: CBATCH_CUDA_ARCHS (environment, else cache), else a
# CMAKE_CUDA_ARCHITECTURES given on the command line, else the GPUs present ("-real": machine code for
# exactly them), else CBATCH_CUDA_DEFAULT_ARCHS. A GPU newer than this nvcc gets the default (its PTX).
function(cbatch_choose_cuda_archs)
  # The environment's value is remembered, so that a re-configure (a new source file) keeps it.
  if(NOT "$ENV{CBATCH_CUDA_ARCHS}" STREQUAL "" AND NOT "$ENV{CBATCH_CUDA_ARCHS}" STREQUAL "${CBATCH_CUDA_ARCHS}")
    set(CBATCH_CUDA_ARCHS "$ENV{CBATCH_CUDA_ARCHS}" CACHE STRING "" FORCE)
  endif()
  if(CBATCH_CUDA_ARCHS)
    set(archs "${CBATCH_CUDA_ARCHS}")
    set(source "CBATCH_CUDA_ARCHS")
  elseif(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(archs "${CMAKE_CUDA_ARCHITECTURES}")
    set(source "CMAKE_CUDA_ARCHITECTURES")
  else()
    cbatch_detect_gpu_archs(gpu_archs)
    cbatch_nvcc_archs(nvcc_archs)
    set(archs "")
    foreach(arch IN LISTS gpu_archs)
      if(NOT arch IN_LIST nvcc_archs)
        message(WARNING "cbatch: this nvcc cannot compile for the GPU's sm_${arch}; using the default list")
        set(archs "")
        break()
      endif()
      list(APPEND archs "${arch}-real")
    endforeach()
    if(archs)
      set(source "the GPUs nvidia-smi lists")
    else()
      set(archs "${CBATCH_CUDA_DEFAULT_ARCHS}")
      set(source "the default; no GPU found")
    endif()
  endif()
  string(REPLACE "," ";" archs "${archs}")
  message(STATUS "cbatch: CUDA architectures ${archs} (${source})")
  set(CMAKE_CUDA_ARCHITECTURES "${archs}" PARENT_SCOPE)
endfunction()

# After enable_language(CUDA): CMAKE_CUDA_ARCHITECTURES in the caller with CMake's special values spelled out
# as the entries they stand for ("native": the GPUs CMake found, "-real"; "all", "all-major": machine code
# for each architecture and PTX for the newest), so that the kernels' target holds an explicit list, which
# the build records for cbatch --version (CMakeLists.txt: CBATCH_CUDA_ARCHITECTURES, read by
# cuda/backend/cuda_architectures.hpp).
function(cbatch_resolve_cuda_archs)
  set(archs "")
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    if(arch STREQUAL "native")
      if(NOT CMAKE_CUDA_ARCHITECTURES_NATIVE)
        message(FATAL_ERROR "cbatch: CUDA architectures 'native', but CMake found no GPU here; "
                            "set CBATCH_CUDA_ARCHS (e.g. 90-real)")
      endif()
      list(APPEND archs ${CMAKE_CUDA_ARCHITECTURES_NATIVE})
    elseif(arch STREQUAL "all")
      list(APPEND archs ${CMAKE_CUDA_ARCHITECTURES_ALL})
    elseif(arch STREQUAL "all-major")
      list(APPEND archs ${CMAKE_CUDA_ARCHITECTURES_ALL_MAJOR})
    else()
      list(APPEND archs "${arch}")
    endif()
  endforeach()
  if(NOT archs STREQUAL CMAKE_CUDA_ARCHITECTURES)
    message(STATUS "cbatch: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES} are ${archs}")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${archs}" PARENT_SCOPE)
endfunction()
