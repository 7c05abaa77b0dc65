#!/bin/bash
# Submits a cbatch job array of NUM_SHARDS tasks (one GPU each) and its merge job.
# Usage: PROMPTS=p.jsonl OUT_DIR=/shared/out MODEL=m.gguf examples/slurm/submit.sh NUM_SHARDS [sbatch options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
num_shards=${1:?usage: submit.sh NUM_SHARDS [sbatch options]}
shift
: "${PROMPTS:?}" "${OUT_DIR:?}" "${MODEL:?}"
export PROMPTS OUT_DIR MODEL
array=$(sbatch --parsable --array="0-$((num_shards - 1))" "$@" "$here/array.sbatch")
merge=$(sbatch --parsable --dependency="afterok:${array%%;*}" "$here/merge.sbatch")
echo "array job $array, merge job $merge: the output will be $OUT_DIR/merged.jsonl"
