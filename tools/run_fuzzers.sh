#!/usr/bin/env bash
# Runs every libFuzzer target of a CBATCH_FUZZ=ON build for a bounded time, starting from the committed
# seeds in tests/fuzz/corpus/<name>/ (new inputs go to a scratch corpus, never into the repository).
# A finding (crash, sanitizer report, uncaught exception, leak, timeout, an allocation over
# -malloc_limit_mb) fails the script and leaves the input under $FUZZ_OUT (default: BUILD/fuzz-out).
# Usage: tools/run_fuzzers.sh [BUILD_DIR (build-robust)] [SECONDS_EACH (30)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-robust}
seconds=${2:-30}
out=${FUZZ_OUT:-$build/fuzz-out}
targets="request_parser tokenizer model_file hf_directory lora_adapter tokenizer_bin sharegpt constraint"
status=0
for name in $targets; do
  bin="$build/tests/fuzz/fuzz_$name"
  if [ ! -x "$bin" ]; then
    echo "run_fuzzers: $bin is missing: configure $build with CC=clang CXX=clang++ -DCBATCH_FUZZ=ON" >&2
    exit 1
  fi
  scratch="$out/$name/corpus"
  rm -rf "$out/$name/artifacts"
  mkdir -p "$scratch" "$out/$name/artifacts"
  log="$out/$name/log.txt"
  max_len=65536
  case $name in model_file|hf_directory) max_len=131072 ;; esac  # whole tiny models of every family
  echo "fuzz_$name: ${seconds} s from tests/fuzz/corpus/$name"
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=$max_len \
      -print_final_stats=1 -artifact_prefix="$out/$name/artifacts/" "$scratch" "tests/fuzz/corpus/$name" \
      > "$log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" | tr '\n' ' '
    grep -Eo "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+" "$log" | tail -1
  else
    status=1
    echo "FINDING in fuzz_$name (input under $out/$name/artifacts/):"
    grep -A40 -E "^==[0-9]+==|runtime error|fuzz property|uncaught|out-of-memory|ERROR: libFuzzer" "$log" | head -60
  fi
done
exit $status
