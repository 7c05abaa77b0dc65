#!/usr/bin/env bash
# Builds llama.cpp's llama-batched-bench and llama-quantize for side-by-side CPU benchmarks
# (tools/bench_vs_llama_cpp.py), from the llama.cpp vendored in the llama-cpp-python sdist on PyPI.
# Usage: tools/llama_cpp/build.sh OUT_DIR   (keep OUT_DIR git-ignored, e.g. build-llama-cpp/)
# Release, native CPU flags, no GPU backend; nice'd and -j2 (JOBS overrides). Idempotent: does nothing when
# both binaries exist. Prints the binaries' folder on its last line.
set -euo pipefail
VERSION=0.3.36  # llama-cpp-python; its vendor/llama.cpp is the llama.cpp measured
OUT=${1:?usage: $0 OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN="$OUT/build/bin"
if [[ -x "$BIN/llama-batched-bench" && -x "$BIN/llama-quantize" ]]; then
    echo "$BIN"
    exit 0
fi
SRC="$OUT/llama_cpp_python-$VERSION"
if [[ ! -d "$SRC/vendor/llama.cpp" ]]; then
    python3 -m pip download --quiet --no-deps --no-binary :all: -d "$OUT/sdist" "llama-cpp-python==$VERSION"
    tar -xzf "$OUT/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$OUT"
fi
LAUNCHER=()
if command -v ccache >/dev/null; then
    LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$SRC/vendor/llama.cpp" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF "${LAUNCHER[@]}" >/dev/null
nice -n 10 cmake --build "$OUT/build" -j"${JOBS:-2}" --target llama-batched-bench llama-quantize
# The architectures this llama.cpp knows: the MoE benchmark needs qwen3moe.
grep -q '"qwen3moe"' "$SRC/vendor/llama.cpp/src/llama-arch.cpp" || { echo "this llama.cpp lacks qwen3moe" >&2; exit 1; }
echo "$BIN"
