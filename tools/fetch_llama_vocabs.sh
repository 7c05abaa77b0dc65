#!/usr/bin/env bash
# Fetches llama.cpp's vocabulary test files (models/ggml-vocab-NAME.gguf: a vocab-only GGUF of a real
# tokenizer; .inp: test strings; .out: the token ids Hugging Face's tokenizer gives them) from the
# llama-cpp-python sdist on PyPI (vendor/llama.cpp/models/), into models/llama-vocabs/ unless they are
# already there. Only those files are kept (75 MB of the 77 MB sdist).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fetch_common.sh"
VERSION=0.3.36  # the llama-cpp-python release whose vendored llama.cpp tools/llama_cpp/build.sh builds
dest_dir="${1:-models}"
vocab_dir="$dest_dir/llama-vocabs"
fetch_begin "$dest_dir" "$vocab_dir" "$vocab_dir/ggml-vocab-gemma-4.gguf.out"
python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$VERSION" >&2
python3 - "$tmp/llama_cpp_python-$VERSION.tar.gz" "$vocab_dir.part" "$VERSION" <<'PY'
import os, sys, tarfile
prefix = f"llama_cpp_python-{sys.argv[3]}/vendor/llama.cpp/models/ggml-vocab-"
os.makedirs(sys.argv[2], exist_ok=True)
with tarfile.open(sys.argv[1]) as sdist:
    for member in sdist.getmembers():
        if member.isfile() and member.name.startswith(prefix):
            with sdist.extractfile(member) as src, open(os.path.join(sys.argv[2], os.path.basename(member.name)), "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$vocab_dir"
mv "$vocab_dir.part" "$vocab_dir"
echo "$vocab_dir"
