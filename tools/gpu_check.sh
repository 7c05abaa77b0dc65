#!/usr/bin/env bash
# GPU validation and benchmarks in one call, for a machine with a CUDA GPU. Stages run in the order given
# (default: info unit sanitize e2e); each has its own time limit and writes its full log to $OUT_DIR.
#   info      GPU, driver, cbatch --version
#   unit      the CUDA unit tests (kernels vs CPU references, whole backend; not the "(emulated)" block-code
#             cases, which need no GPU and run in CI); when they fail, each case is
#             run again in a process of its own (unit-cases.log: exit status and name), so that a device
#             fault, which spoils every later case of its process, names its own case only
#   sanitize  compute-sanitizer memcheck on the CUDA unit tests
#   sanitize-attention  memcheck and racecheck on the attention tests only (every attention kernel), the
#             device sampler's and the device logprobs'
#   e2e       tests/e2e/test_gpu.py: CUDA vs CPU outputs, bf16 agreement, modes and budgets on the GPU
#   gpu-families  tests/e2e/test_gpu_families.py: every dense family's tiny models (HF and GGUF) on CUDA fp32
#             against the float64 reference, bf16 agreement printed, modes and budgets per family
#   smol      bench, dummy SmolLM2-135M shape, 64 requests 16:256 / 16:256, --max-num-seqs 16, all modes
#   1b        bench, dummy Llama-3.2-1B shape, $NUM_PROMPTS requests 128:1024 / 128:1024, continuous,static
#   8b-short  bench, dummy Llama-3.1-8B shape, $NUM_PROMPTS requests 128 / 128, continuous,static
#   8b-long   bench, dummy Llama-3.1-8B shape, $NUM_PROMPTS requests 1000 / 1000, continuous
#   8b-long-static  the same workload in static mode (a separate stage: each takes minutes)
#   8b-sharegpt  bench, dummy Llama-3.1-8B shape, $NUM_PROMPTS requests of --dataset sharegpt-synthetic (ShareGPT-like
#             lengths, mean 230 / 203), bf16, continuous: the workload of the published SGLang / LMDeploy / vLLM
#             figures in docs/benchmarks/README.md; 8b-sharegpt-fp8 the same with --quantization fp8
#             --kv-cache-dtype fp8 (compute capability 8.9 or newer)
#   1b-sampled  the 1b workload at --temperature 1.0 (vLLM's default) with --cuda-kernel sampling=host: the host
#             sampler's cost (logits copied back)
#   1b-sampled-device  the same drawn on the GPU (the default: no logits copied back)
#   1b-top-p, 1b-top-p-device  the 1b workload at --temperature 0.8 --top-p 0.95, host and device sampling
#   e2e-cc, 1b-cc, 8b-long-cc  e2e, 1b and 8b-long with --cuda-kernel prefill=off (prefill chunks
#             through the CUDA-core attention instead of the tensor cores): compare with the stages without it
#   1b-t16, 8b-long-t16  1b and 8b-long with --cuda-kernel decode=tensor-cores-16 (the 16-key split
#             kernel, the fallback where the stream kernel's shared memory does not fit)
#   fp8       --quantization fp8 (needs compute capability 8.9): the FP8 unit cases of test_cuda (device
#             quantization vs the host bit for bit, the cuBLASLt FP8 GEMM vs a reference on the 1B/8B shapes,
#             fp8 vs bf16 logit statistics on a small and the 1B dummy model, the refusals),
#             tests/e2e/test_fp8_flags.py, and tools/fp8_accuracy.py (greedy agreement on SmolLM2 and Gemma 3
#             270M from models/, the 1B logit statistics; report in $OUT_DIR/fp8-accuracy.json)
#   1b-fp8, 8b-short-fp8, 8b-long-fp8  the 1b, 8b-short and 8b-long workloads with --quantization fp8
#   fp8-kv    --kv-cache-dtype fp8: its CUDA unit tests (the FP8 cache write, every attention kernel against
#             the reference on the dequantized cache, the backend against a bf16 cache)
#             and tests/e2e/test_gpu_fp8kv.py (dummy SmolLM2 in every mode; greedy agreement with the bf16
#             cache on SmolLM2-135M and Gemma 3 270M where present)
#   8b-long-fp8kv  the 8b-long workload with --kv-cache-dtype fp8 (twice the KV blocks in the same memory)
#   table     the markdown rows of every bench-*.json in $OUT_DIR (tools/bench_table.py), for docs/benchmarks
#   profile   --cuda-profile on the 1B shape, 200 requests: device time per phase of the step
#   profile-8b  the same on the 8B shape, 200 requests of 1000 / 1000 (about 40 s)
#   profile-sampled  profile at --temperature 1.0 with --cuda-kernel sampling=device: the draws' share ("pick+copy")
#   features  logprobs and structured outputs on the GPU: the logprob_rows and masked sample_rows kernels vs
#             the host, an engine run of constrained requests drawn on the device vs the host path
#             (test_cuda), and tests/e2e/test_gpu_logprobs.py (CUDA fp32 logprobs vs the CPU backend's)
#   families  the CUDA unit tests of the family features: every attention kernel's family build (windows,
#             softcaps, query scales), head_dim 256, RoPE with biases / q/k norms / longrope, sandwich norms,
#             GeGLU, softcap, embedding scale, and one model per family against the CPU backend
#   moe       mixtures of experts on CUDA: the MoE kernel cases of test_cuda (routing, permutation, gather,
#             grouped expert GEMMs, clamped SwiGLU with expert biases, combine; the backend's MoE models vs
#             the CPU backend, experts_touched, the refusals) and tests/e2e/test_gpu_moe.py (the tiny MoE
#             models' greedy tokens on CUDA fp32 vs the CPU, bf16 agreement, modes, experts_touched per step)
#   lora      LoRA adapters on CUDA: the lora cases of test_cuda (shrink + expand kernels vs the CPU's grouped
#             product in fp32/bf16/fp16, the backend with adapters vs the CPU backend, the FP8 refusal) and
#             tests/e2e/test_gpu_lora.py (mixed base/PEFT/GGUF-adapter file and Phi-3's fused projections:
#             CUDA fp32 greedy tokens vs the CPU's in several modes; bf16 agreement printed)
#   deltanet  hybrid models on CUDA: the gated DeltaNet launchers (cuda/recurrent/: conv with its window, q/k
#             norms and gates, the delta rule, the gated norm) in fp32 and bf16 against the float64 reference,
#             up to Qwen3.5's 128 x 128 heads, chunked = whole bit for bit; the chunked delta rule's launcher
#             against the token-by-token one and the reference (runs of 1 to 3C + 5 rows, padding, decay near
#             0 and 1, Qwen3.5's heads); the refusals; and tests/e2e/test_gpu_hybrid.py (tiny Qwen3.5,
#             Qwen3.5-MoE and Qwen3-Next, whose DeltaNet projections grouped by key head the upload puts in
#             Qwen3.5's order, HF and GGUF, CUDA fp32 greedy tokens vs the float64 reference, modes, budgets,
#             n = 2, preemption: bit for bit with deltanet=recurrent, decisive tokens with chunked), and
#             tests/e2e/test_gpu_hybrid_prefix.py (prefix caching with the recurrent-state snapshots in device
#             slots, on a model of each recurrent kind: tokens as without caching, the hits, eviction)
#   deltanet-bench  bench, dummy Qwen3.5-4B shape (examples/models/qwen3.5-4b.json), 16 requests 4096 / 8,
#             continuous, --cuda-profile: the chunked delta rule (deltanet-bench-chunked) against token by
#             token (deltanet-bench-recurrent)
#   mamba-bench  bench, dummy Granite-4.0-H-Micro shape (examples/models/granite-4.0-h-micro.json), 16 requests
#             4096 / 8, continuous, --cuda-profile: the chunked Mamba-2 scan (mamba-bench-chunked) against token
#             by token (mamba-bench-recurrent)
#   ssm       hybrid models' other recurrent kinds on CUDA: LFM2's short-conv launcher (B * x, the conv with
#             its window, C *) up to LFM2-350M's 1,024 channels and the Mamba-2 launchers (conv with bias and
#             SiLU, the selective scan, the gated grouped norm) up to 64 x 128 heads, in fp32 and bf16 against
#             the float64 reference, chunked = whole bit for bit, and the chunked Mamba-2 scan (SSD form) against
#             the reference and the token-by-token scan on runs of 1 to 3Q + 5 rows; the delta-scaled norm,
#             relu^2 and the ungated shared expert in the emulated unit cases; the refusals; and
#             tests/e2e/test_gpu_hybrid.py (the tiny LFM2, Granite 4.0-H dense and MoE and Nemotron-H beside the
#             Qwen3.5 and Qwen3-Next models, CUDA fp32 greedy tokens vs the float64 reference, modes, n = 2,
#             preemption; the Mamba-2 models bit for bit across them with mamba-scan=recurrent, the chunked
#             default against the reference's decisive tokens; deltanet's e2e half is the same)
#   gemma4    Gemma 4 on CUDA: the RoPE cases with the V norm and the shared layers' q-only step, the per-layer
#             input kernels, the MoE routing with Gemma 4's scales, the refusals (test_cuda's cases), and
#             tests/e2e/test_gpu_gemma4.py (tiny Gemma 4 dense with per-layer inputs, shared K/V, k_eq_v,
#             proportional RoPE, double-wide FFNs and global layers of their own head size and K/V heads, the
#             same at the checkpoints' head sizes 256 and 512, and its MoE block, HF and GGUF: CUDA fp32 greedy
#             tokens and logprobs vs the float64 reference and the CPU, modes, budgets, preemption); the
#             head-512 line (gemma4-h512): paged_attention at head_dim 512 on the GPU vs the reference (every
#             dtype, family builds, sinks, FP8 cache) and the layers in their own shapes (a cache slot wider
#             than the layer, the tile list of another GQA group, every kernel), with their emulated cases
#   linear-blocks  linear weights kept in their blocks (--cuda-kernel weights=blocks): test_cuda's linear-blocks
#             cases (LinearRunner on every block type against the decoded T path for m = 1..256) and the
#             quantized expert GEMM's (the same kernel), then tests/e2e/test_gpu_linear_blocks.py (a Q4_K_M-mix
#             GGUF and GPTQ, FP8 and NVFP4 directories, weights=blocks vs weights=dequant: greedy agreement,
#             weight_bytes smaller, the load notes)
#   linear-blocks-bench  linear_blocks_bench: the Llama 3.1 8B layer's four products in bf16 against the same
#             shapes in Q4_K, Q4_0, Q8_0, FP8 and NVFP4 blocks at 1-2048 rows (targets: 4-bit blocks >= 2x
#             bf16 and FP8 >= 1.6x at 1-16 rows; 256 and 2048 rows within 10% of bf16)
#   moe-e2e, gpt-oss-e2e, lora-e2e, features-e2e, fp8-kv-e2e  the end-to-end halves of moe, gpt-oss, lora,
#             features and fp8-kv alone (after unit, which ran their CUDA cases already)
#   moe-loop  the MoE backend case with --cuda-kernel moe-gemm=loop (one GEMM per expert segment; the grouped
#             GEMM's own case checks both) and tests/e2e/test_gpu_moe.py with it
#   gpt-oss   gpt-oss on CUDA: the attention-sink cases of test_cuda (every attention kernel with sinks vs the
#             reference, the backend's gpt-oss test model vs the CPU backend through every attention kernel,
#             the rmsnorm with the o bias) and tests/e2e/test_gpu_gpt_oss.py (the tiny gpt-oss's greedy
#             tokens on CUDA fp32 vs the CPU for its bf16, MXFP4 and GGUF files, modes, experts_touched)
#   gpt-oss-20b  bench, dummy gpt-oss-20b shape (24 layers, 32 experts, top-4, sinks, 128-key windows on
#             half the layers), bf16, $NUM_PROMPTS requests 128 / 128, continuous (42 GB of bf16 weights)
#   gpt-oss-mxfp4  the gpt-oss-20b workload with --dummy-dtype mxfp4 (experts as MXFP4 blocks, about 10 GB,
#             kept so and multiplied by moe_quant_gemm; the rest bf16), then the same with
#             --cuda-kernel moe-experts=dequant (the experts decoded to bf16, cuBLAS): bench-gpt-oss-mxfp4.json and
#             bench-gpt-oss-mxfp4-dequant.json
#   qwen3-30b-a3b  bench, dummy Qwen3-30B-A3B shape (48 layers, 128 experts, top-8, width 768), bf16,
#             $NUM_PROMPTS requests 128 / 128, continuous (61 GB of bf16 weights: an 80 GB GPU);
#             qwen3-30b-a3b-loop the same with --cuda-kernel moe-gemm=loop
#   qwen2.5-7b  bench, dummy Qwen2.5-7B shape (q/k/v biases, GQA group 7), $NUM_PROMPTS requests 128:1024 /
#             128:1024, continuous, bf16
#   gemma-3-4b  bench, dummy Gemma-3-4B shape (head_dim 256 on the CUDA-core attention, q/k norms, sandwich
#             norms, GeGLU, 1024-key windows on 5 of 6 layers, 262k vocabulary), the same workload
#   decode-bench  every decode attention kernel timed alone (decode_attention_bench) on the 1B and 8B
#             shapes: 256 sequences of 540 keys and of 128..2048 / 1000..2000 keys; 8 of 4000, 32 of 100..300
#             (and two of them over an FP8 cache, --kv-cache-dtype fp8)
#   ncu-decode  Nsight Compute on one decode-attention launch each of the 1B and 8B shapes (256 sequences
#             of ~540 keys): time, DRAM throughput, occupancy, warp stall reasons, pipe utilization;
#             $DECODE_KERNEL (a --cuda-kernel decode= value; unset: the default kernel) picks the kernel (the
#             stream kernel's merge launch is not counted)
# Environment: BIN_DIR (default build), OUT_DIR (default gpu-out), CBATCH_SHARED_DIR, NUM_PROMPTS (1000),
# DEADLINE_S (the seconds the whole call may take: each stage's limit is cut to what is left, and a stage
# with under 10 s left is not run), ARCHIVE (a .tar.gz of OUT_DIR rewritten after each stage). Every stage
# appends its verdict to OUT_DIR/summary.txt and a JSON line to OUT_DIR/stages.jsonl. When info fails (the
# binaries do not run there) nothing else is tried.
# Seconds per stage on an H200 (2026-11-26, NUM_PROMPTS=300), to plan a call: info 1, unit 85 (unit-cases
# 121 more when it fails), e2e 12, gpu-families 42, moe-e2e 16, gpt-oss-e2e 8, lora-e2e 5, features-e2e 2,
# fp8-kv-e2e 6, decode-bench 10 in all, 1b 16, 8b-short 9, 8b-long 41 (300 requests of 1000 / 1000 at
# 7,400 tok/s: 1000 take about 140), 8b-long-fp8kv 45, 8b-sharegpt 16, 1b-sampled 51 (host sampling),
# 1b-sampled-device 8. From the H100 (2026-11-23, NUM_PROMPTS=1000): sanitize on the attention tests 5
# (memcheck) and 45 (racecheck), profile 10, ncu-decode about 60 a shape. Never run to the end: fp8 (about
# 90 guessed), the FP8-weights benches, qwen3-30b-a3b (150-300 guessed, most of it the 61 GB of weights
# generated on the device), gpt-oss-20b (120-250), gpt-oss-mxfp4 (150-400 for its two benches, guessed from
# gpt-oss-20b's: less weight memory to generate, the same workload twice), qwen2.5-7b and gemma-3-4b (2-5
# minutes at 1000).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build}
OUT_DIR=${OUT_DIR:-gpu-out}
NUM_PROMPTS=${NUM_PROMPTS:-1000}
CBATCH="$BIN_DIR/cbatch"
mkdir -p "$OUT_DIR"
export CBATCH_BIN="$CBATCH"

stage() {  # stage NAME LIMIT_S COMMAND...: runs with a time limit, keeps the whole log, shows its tail
  local name=$1 limit=$2
  shift 2
  if [[ -n ${DEADLINE_S:-} ]]; then  # the call's own limit: a stage gets at most what is left of it
    local left=$((DEADLINE_S - SECONDS - 5))
    if ((left < 10)); then
      echo "=== $name: not run (${left} s left of DEADLINE_S=$DEADLINE_S)" | tee -a "$OUT_DIR/summary.txt"
      printf '{"stage": "%s", "exit": null, "seconds": 0, "note": "not run: no time left"}\n' "$name" >>"$OUT_DIR/stages.jsonl"
      return 1
    fi
    ((limit > left)) && limit=$left
  fi
  echo "=== $name ($(date -u +%H:%M:%S), limit $limit s)"
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT_DIR/$name.log"
  local verdict=passed
  ((rc == 124)) && verdict="timed out"
  ((rc != 0 && rc != 124)) && verdict=failed
  ((rc == 77)) && verdict=skipped
  echo "=== $name: exit $rc in $((SECONDS - start)) s"
  echo "$name: $verdict (exit $rc, $((SECONDS - start)) s)" >>"$OUT_DIR/summary.txt"
  printf '{"stage": "%s", "exit": %d, "seconds": %d}\n' "$name" "$rc" "$((SECONDS - start))" >>"$OUT_DIR/stages.jsonl"
  # ARCHIVE: a .tar.gz of OUT_DIR rewritten after every stage, so that a call cut off keeps what ran
  [[ -n ${ARCHIVE:-} ]] && tar czf "$ARCHIVE" -C "$OUT_DIR" .
  return $rc
}

unit_cases() {  # every test case of test_cuda in a process of its own: a device fault names its case only
  local bin=$1 name rc
  "$bin" --list-test-cases | grep -v -e '^\[doctest\]' -e '^====' -e '^CUDA device' -e '^SKIPPED' |
    while IFS= read -r name; do
      [[ -z $name || $name == *"(emulated)"* ]] && continue
      timeout 60 "$bin" -tc="${name//,/\\,}" >/dev/null 2>&1
      rc=$?
      echo "$rc $name"
    done
}

bench() {  # bench NAME LIMIT_S CONFIG INPUT OUTPUT MODES [extra flags]: one issue-5 workload as a stage
  local name=$1 limit=$2 config=$3 input=$4 output=$5 modes=$6
  shift 6
  stage "$name" "$limit" "$CBATCH" bench --model "dummy:examples/models/$config" --num-prompts "$NUM_PROMPTS" \
    --input-len "$input" --output-len "$output" --modes "$modes" --max-num-seqs 256 --device cuda --quiet \
    --json "$OUT_DIR/bench-$name.json" "$@"
}

sharegpt() {  # sharegpt NAME [extra flags]: 1000 synthetic ShareGPT requests on the 8B shape, bf16, continuous
  local name=$1
  shift
  stage "$name" 400 "$CBATCH" bench --model dummy:examples/models/llama-3.1-8b.json --dataset sharegpt-synthetic \
    --num-prompts "$NUM_PROMPTS" --modes continuous --max-num-seqs 256 --max-num-batched-tokens 8192 --dtype bf16 \
    --device cuda --quiet --json "$OUT_DIR/bench-$name.json" "$@"
}

profile() {  # profile NAME CONFIG INPUT OUTPUT [extra flags]: --cuda-profile on 200 continuous requests
  local name=$1 config=$2 input=$3 output=$4
  shift 4
  stage "$name" 200 "$CBATCH" bench --model "dummy:examples/models/$config" --num-prompts 200 \
    --input-len "$input" --output-len "$output" --modes continuous --max-num-seqs 256 --max-num-batched-tokens 8192 \
    --device cuda --quiet --cuda-profile "$@"
}

for s in "${@:-info unit sanitize e2e}"; do
  for name in $s; do
    case $name in
      info) stage info 60 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; $CBATCH --version" ||
              { echo "info failed: the binaries do not run here; nothing else is tried"; exit 1; } ;;
      unit)  # a failing run is repeated a case a process, so that a device fault stops only its own case
        stage unit 300 "$BIN_DIR/tests/test_cuda" -tce='*(emulated)*' ||
          stage unit-cases 300 bash -c "$(declare -f unit_cases); unit_cases $BIN_DIR/tests/test_cuda" ;;
      sanitize) stage sanitize 400 compute-sanitizer --tool memcheck --leak-check no "$BIN_DIR/tests/test_cuda" ;;
      sanitize-attention)
        stage memcheck-attention 200 compute-sanitizer --tool memcheck --leak-check no "$BIN_DIR/tests/test_cuda" \
          -tc='*paged_attention*,*stream decode*,*sample_rows*,*logprob_rows*,*family build*'
        stage racecheck-attention 300 compute-sanitizer --tool racecheck "$BIN_DIR/tests/test_cuda" \
          -tc='*paged_attention*,*stream decode*,*sample_rows*,*logprob_rows*,*family build*' ;;
      e2e) stage e2e 400 python3 tests/e2e/test_gpu.py ;;
      gpu-families) stage gpu-families 300 python3 tests/e2e/test_gpu_families.py ;;
      moe-e2e) stage moe-e2e 400 python3 tests/e2e/test_gpu_moe.py ;;
      gpt-oss-e2e) stage gpt-oss-e2e 400 python3 tests/e2e/test_gpu_gpt_oss.py ;;
      lora-e2e) stage lora-e2e 300 python3 tests/e2e/test_gpu_lora.py ;;
      features-e2e) stage features-e2e 300 python3 tests/e2e/test_gpu_logprobs.py ;;
      fp8-kv-e2e) stage fp8-kv-e2e 400 python3 tests/e2e/test_gpu_fp8kv.py ;;
      fp8)
        stage fp8-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*fp8*,*FP8*,*cuBLASLt*'
        stage fp8-e2e 120 python3 tests/e2e/test_fp8_flags.py
        stage fp8-accuracy 400 python3 tools/fp8_accuracy.py --build "$BIN_DIR" --json "$OUT_DIR/fp8-accuracy.json" ;;
      1b-fp8) bench 1b-fp8 500 llama-3.2-1b.json 128:1024 128:1024 continuous,static --max-num-batched-tokens 8192 \
                --quantization fp8 ;;
      8b-short-fp8) bench 8b-short-fp8 500 llama-3.1-8b.json 128 128 continuous,static --max-num-batched-tokens 8192 \
                      --quantization fp8 ;;
      8b-long-fp8) bench 8b-long-fp8 550 llama-3.1-8b.json 1000 1000 continuous --max-num-batched-tokens 8192 \
                     --quantization fp8 ;;
      features)
        stage features-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*logprob_rows*,*constrained rows*,*sample_rows*'
        stage features-e2e 300 python3 tests/e2e/test_gpu_logprobs.py ;;
      moe)
        stage moe-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*moe*,*mixture-of-experts*,*experts_touched*,*refuses*'
        stage moe-e2e 400 python3 tests/e2e/test_gpu_moe.py ;;
      gemma4)
        stage gemma4-unit 200 "$BIN_DIR/tests/test_cuda" \
          -tc='*rope_kv_cache*,*per-layer*,*residual tail*,*moe routing*,*refuses what its kernels lack*'
        stage gemma4-h512 300 "$BIN_DIR/tests/test_cuda" \
          -tc='*head_dim 512*,*own shapes*,*cache slot wider*,*Gemma 4*,*layer*shape*'
        stage gemma4-e2e 300 python3 tests/e2e/test_gpu_gemma4.py ;;
      deltanet)
        stage deltanet-unit 120 "$BIN_DIR/tests/test_cuda" -tc='*DeltaNet*,*refuses what its kernels lack*'
        stage deltanet-e2e 450 python3 tests/e2e/test_gpu_hybrid.py
        stage deltanet-prefix 300 python3 tests/e2e/test_gpu_hybrid_prefix.py ;;
      deltanet-bench)  # prefill-bound: 16 prompts of 4,096 tokens on Qwen3.5-4B's shape, both delta rules
        for k in chunked recurrent; do
          stage "deltanet-bench-$k" 300 "$CBATCH" bench --model dummy:examples/models/qwen3.5-4b.json \
            --num-prompts 16 --input-len 4096 --output-len 8 --modes continuous --max-num-seqs 16 \
            --max-num-batched-tokens 8192 --dtype bf16 --device cuda --quiet --cuda-profile \
            --cuda-kernel "deltanet=$k" --json "$OUT_DIR/bench-deltanet-$k.json"
        done ;;
      mamba-bench)  # prefill-bound: 16 prompts of 4,096 tokens on Granite-4.0-H-Micro's shape, both scans
        for k in chunked recurrent; do
          stage "mamba-bench-$k" 300 "$CBATCH" bench --model dummy:examples/models/granite-4.0-h-micro.json \
            --num-prompts 16 --input-len 4096 --output-len 8 --modes continuous --max-num-seqs 16 \
            --max-num-batched-tokens 8192 --dtype bf16 --device cuda --quiet --cuda-profile \
            --cuda-kernel "mamba-scan=$k" --json "$OUT_DIR/bench-mamba-$k.json"
        done ;;
      ssm)
        stage ssm-unit 120 "$BIN_DIR/tests/test_cuda" -tc='*short conv*,*Mamba-2*,*rmsnorm*,*relu*,*moe*,*refuses what its kernels lack*'
        stage ssm-e2e 600 python3 tests/e2e/test_gpu_hybrid.py ;;
      lora)
        stage lora-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*lora*,*LoRA*'
        stage lora-e2e 300 python3 tests/e2e/test_gpu_lora.py ;;
      moe-loop)
        stage moe-loop-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*moe-gemm=loop*'
        stage moe-loop-e2e 400 python3 tests/e2e/test_gpu_moe.py --cuda-kernel moe-gemm=loop ;;
      gpt-oss)
        stage gpt-oss-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*sinks*,*gpt-oss*,*rmsnorm*'
        stage gpt-oss-e2e 400 python3 tests/e2e/test_gpu_gpt_oss.py ;;
      gpt-oss-20b) bench gpt-oss-20b 550 gpt-oss-20b.json 128 128 continuous --max-num-batched-tokens 8192 \
                     --dtype bf16 ;;
      gpt-oss-mxfp4)
        bench gpt-oss-mxfp4 550 gpt-oss-20b.json 128 128 continuous --max-num-batched-tokens 8192 --dtype bf16 \
          --dummy-dtype mxfp4
        bench gpt-oss-mxfp4-dequant 550 gpt-oss-20b.json 128 128 continuous \
          --max-num-batched-tokens 8192 --dtype bf16 --dummy-dtype mxfp4 --cuda-kernel moe-experts=dequant ;;
      qwen3-30b-a3b) bench qwen3-30b-a3b 550 qwen3-30b-a3b.json 128 128 continuous --max-num-batched-tokens 8192 \
                       --dtype bf16 ;;
      qwen3-30b-a3b-loop) bench qwen3-30b-a3b-loop 550 qwen3-30b-a3b.json 128 128 continuous \
                            --max-num-batched-tokens 8192 --dtype bf16 --cuda-kernel moe-gemm=loop ;;
      families) stage families 300 "$BIN_DIR/tests/test_cuda" \
                  -tc='*famil*,*sandwich*,*GeGLU*,*softcap*,*scales them*,*head_dim 256*,*paged_attention*' ;;
      qwen2.5-7b) bench qwen2.5-7b 550 qwen2.5-7b.json 128:1024 128:1024 continuous --max-num-batched-tokens 8192 \
                    --dtype bf16 ;;
      gemma-3-4b) bench gemma-3-4b 550 gemma-3-4b.json 128:1024 128:1024 continuous --max-num-batched-tokens 8192 \
                    --dtype bf16 ;;
      smol) stage smol 300 "$CBATCH" bench --model dummy:examples/models/smollm2-135m.json --num-prompts 64 \
              --input-len 16:256 --output-len 16:256 --max-num-seqs 16 --device cuda --quiet --json "$OUT_DIR/bench-smol.json" ;;
      1b) bench 1b 500 llama-3.2-1b.json 128:1024 128:1024 continuous,static --max-num-batched-tokens 8192 ;;
      8b-short) bench 8b-short 500 llama-3.1-8b.json 128 128 continuous,static --max-num-batched-tokens 8192 ;;
      8b-long) bench 8b-long 550 llama-3.1-8b.json 1000 1000 continuous --max-num-batched-tokens 8192 ;;
      1b-sampled) bench 1b-sampled 500 llama-3.2-1b.json 128:1024 128:1024 continuous --max-num-batched-tokens 8192 \
                    --temperature 1.0 --cuda-kernel sampling=host ;;
      1b-sampled-device) bench 1b-sampled-device 500 llama-3.2-1b.json 128:1024 128:1024 \
                           continuous --max-num-batched-tokens 8192 --temperature 1.0 --cuda-kernel sampling=device ;;
      1b-top-p) bench 1b-top-p 500 llama-3.2-1b.json 128:1024 128:1024 continuous --max-num-batched-tokens 8192 \
                  --temperature 0.8 --top-p 0.95 --cuda-kernel sampling=host ;;
      1b-top-p-device) bench 1b-top-p-device 500 llama-3.2-1b.json 128:1024 128:1024 \
                         continuous --max-num-batched-tokens 8192 --temperature 0.8 --top-p 0.95 \
                         --cuda-kernel sampling=device ;;
      8b-sharegpt) sharegpt 8b-sharegpt ;;
      8b-sharegpt-fp8) sharegpt 8b-sharegpt-fp8 --quantization fp8 --kv-cache-dtype fp8 ;;
      8b-long-static) bench 8b-long-static 550 llama-3.1-8b.json 1000 1000 static --max-num-batched-tokens 8192 ;;
      e2e-cc) stage e2e-cc 400 python3 tests/e2e/test_gpu.py --cuda-kernel prefill=off ;;
      1b-cc) bench 1b-cc 500 llama-3.2-1b.json 128:1024 128:1024 continuous,static \
               --max-num-batched-tokens 8192 --cuda-kernel prefill=off ;;
      8b-long-cc) bench 8b-long-cc 550 llama-3.1-8b.json 1000 1000 continuous \
                    --max-num-batched-tokens 8192 --cuda-kernel prefill=off ;;
      1b-t16) bench 1b-t16 500 llama-3.2-1b.json 128:1024 128:1024 \
                continuous,static --max-num-batched-tokens 8192 --cuda-kernel decode=tensor-cores-16 ;;
      8b-long-t16) bench 8b-long-t16 550 llama-3.1-8b.json 1000 1000 \
                     continuous --max-num-batched-tokens 8192 --cuda-kernel decode=tensor-cores-16 ;;
      linear-blocks)
        stage linear-blocks-unit 200 "$BIN_DIR/tests/test_cuda" -tc='*linear blocks*,*moe quantized*,*decode_blocks*'
        stage linear-blocks-e2e 300 python3 tests/e2e/test_gpu_linear_blocks.py ;;
      linear-blocks-bench) stage linear-blocks-bench 200 "$BIN_DIR/linear_blocks_bench" --iters 10 ;;
      fp8-kv)
        stage fp8-kv-unit 300 "$BIN_DIR/tests/test_cuda" -tc='*FP8*'
        stage fp8-kv-e2e 400 python3 tests/e2e/test_gpu_fp8kv.py ;;
      8b-long-fp8kv) bench 8b-long-fp8kv 550 llama-3.1-8b.json 1000 1000 continuous --max-num-batched-tokens 8192 \
                       --kv-cache-dtype fp8 ;;
      profile) profile profile llama-3.2-1b.json 128:1024 128:1024 ;;
      profile-8b) profile profile-8b llama-3.1-8b.json 1000 1000 ;;
      profile-sampled) profile profile-sampled llama-3.2-1b.json 128:1024 128:1024 \
                         --temperature 1.0 --cuda-kernel sampling=device ;;
      table) python3 tools/bench_table.py "$OUT_DIR"/bench-*.json ;;
      decode-bench)
        i=0
        for args in "--head-dim 64 --context 540" "--head-dim 64 --context 128:2048" "--head-dim 128 --context 540" \
                    "--head-dim 128 --context 1000:2000" "--head-dim 128 --seqs 8 --context 4000" \
                    "--head-dim 64 --seqs 32 --context 100:300" "--head-dim 128 --context 1000:2000 --kv-cache-dtype fp8" \
                    "--head-dim 64 --context 540 --kv-cache-dtype fp8"; do
          i=$((i + 1))
          # shellcheck disable=SC2086  # the arguments are meant to split
          stage "decode-bench-$i" 120 "$BIN_DIR/decode_attention_bench" $args
        done ;;
      ncu-decode)
        for shape in 1b:llama-3.2-1b:600 8b:llama-3.1-8b:1000; do
          IFS=: read -r tag config skip <<<"$shape"
          stage "ncu-decode-$tag" 200 \
            ncu --kernel-name regex:decode_attention --launch-skip "$skip" --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
            "$CBATCH" bench --model "dummy:examples/models/$config.json" --num-prompts 256 --input-len 512 \
            --output-len 64 --modes continuous --max-num-seqs 256 --max-num-batched-tokens 8192 --device cuda --quiet \
            ${DECODE_KERNEL:+--cuda-kernel "decode=$DECODE_KERNEL"}
        done ;;
      *) echo "unknown stage $name" ;;
    esac
  done
done
