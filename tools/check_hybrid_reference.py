#!/usr/bin/env python3
"""A development check of tests/e2e/hybrid_reference.py against transformers (not run in CI: it needs torch).
Every tiny hybrid model (tests/e2e/tiny_hybrid_models.py) is written as a Hugging Face directory, loaded with
AutoModelForCausalLM in float64 (eager attention, eager experts: the grouped-matmul experts refuse float64), and
compared with the reference on a few prompts: the last position's logits after the whole prompt, after the prompt
fed in chunks (transformers' cache carrying the conv window and recurrent state), and at each of a few decode steps
(transformers' one-token recurrent path) fed transformers' own greedy tokens. The model is then saved again by
transformers (its config.json and names, float64 weights: "resaved"), and the reference read from that directory
is compared with the one read from the original. Prints the largest |logit difference| per model and mode, and
fails above --tolerance.
transformers' slow torch paths are the ground truth: the fast kernels (flash-linear-attention's `fla`,
`causal_conv1d`, `mamba_ssm`) are blocked before transformers is imported, so its hub-kernel wrappers fall back to
their PyTorch implementations. Those compute the delta rule, the Mamba-2 scan, the gated norms and RoPE's angles in
float32 even in a float64 model, hence differences of about 1e-6, not 1e-12.
With --llama-cpp SDIST, each model's GGUF is also run by llama.cpp itself (F32 KV cache, through the ctypes
bindings of the llama-cpp-python sdist SDIST and its vendored llama.cpp built as a shared library) and compared
with the reference read from that GGUF, prefill and decode: the check that the GGUF writer and loader follow
llama.cpp, not only each other. The library, built once (the sdist as tools/llama_cpp/build.sh downloads it):
    cmake -S SDIST/vendor/llama.cpp -B SDIST/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
    cmake --build SDIST/build -j2 --target llama; pip install diskcache   # the bindings import it
    tools/check_hybrid_reference.py [--models qwen3_5,lfm2] [--chunk 7] [--tolerance 1e-4] [--llama-cpp SDIST]"""
import argparse
import os
import random
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
FAST_KERNELS = ("fla", "causal_conv1d", "mamba_ssm")
for blocked in FAST_KERNELS:  # an import of a None entry raises ImportError: transformers takes its torch path
    sys.modules[blocked] = None

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import hybrid_reference as reference  # noqa: E402
import tiny_hybrid_models as tiny  # noqa: E402

DECODE_STEPS = 6


def load(directory):
    model, info = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float64, attn_implementation="eager",
                                                       experts_implementation="eager", output_loading_info=True)
    if info["missing_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"{directory}: transformers initialised {info['missing_keys'] or info['mismatched_keys']}")
    return model.eval()


def transformers_logits(model, prompt, chunk):
    """transformers' last-position logits after `prompt` fed in chunks of `chunk`, then after each of
    DECODE_STEPS greedy tokens fed one at a time: (prefill logits, [decode logits], decode tokens)."""
    cache, ids = None, []
    with torch.no_grad():
        for start in range(0, len(prompt), chunk):
            out = model(input_ids=torch.tensor([prompt[start:start + chunk]]), cache=cache, use_cache=True)
            cache = out.cache
        rows = [out.logits[0, -1].numpy()]
        for _ in range(DECODE_STEPS):
            ids.append(int(np.argmax(rows[-1])))
            out = model(input_ids=torch.tensor([[ids[-1]]]), cache=cache, use_cache=True)
            cache = out.cache
            rows.append(out.logits[0, -1].numpy())
    return rows[0], rows[1:], ids


def reference_logits(m, prompt, chunk, ids):
    seq = reference.Sequence(m)
    rows = [reference.logits(m, reference.prefill(m, prompt, seq, chunk))]
    for token in ids:
        rows.append(reference.logits(m, reference.forward(m, [token], seq)[-1]))
    return rows[0], rows[1:]


def compare(name, work, prompts, chunk):
    """{mode: largest |logit difference|} of one model over the prompts."""
    hf_dir = os.path.join(work, name)
    tiny.write_hf(hf_dir, name, tiny.random_weights(name))
    model, m = load(hf_dir), reference.load_hf(hf_dir)
    model.save_pretrained(hf_dir + "-resaved")
    resaved = reference.load_hf(hf_dir + "-resaved")
    worst = {"whole": 0.0, f"chunks of {chunk}": 0.0, "decode": 0.0, "resaved": 0.0}
    for prompt in prompts:
        for mode, size in (("whole", len(prompt)), (f"chunks of {chunk}", chunk)):
            got, decoded, ids = transformers_logits(model, prompt, size)
            want, want_decoded = reference_logits(m, prompt, size, ids)
            worst[mode] = max(worst[mode], float(np.abs(got - want).max()))
            if mode == "whole":
                worst["decode"] = max(worst["decode"], *(float(np.abs(a - b).max())
                                                         for a, b in zip(decoded, want_decoded)))
                again = reference_logits(resaved, prompt, size, ids)[0]
                worst["resaved"] = max(worst["resaved"], float(np.abs(again - want).max()))
    return worst


def llama_cpp_worst(bindings, gguf_path, m, prompts):
    """{mode: largest |logit difference|} of llama.cpp and the reference on one GGUF, decoding llama.cpp's tokens."""
    llm = bindings.Llama(model_path=gguf_path, n_ctx=128, n_batch=64, n_ubatch=64, logits_all=True, verbose=False,
                         type_k=0, type_v=0)  # GGML_TYPE_F32: an F16 cache would round keys and values
    worst = {"llama.cpp prefill": 0.0, "llama.cpp decode": 0.0}
    for prompt in prompts:
        llm.reset()
        llm.eval(prompt)
        seq = reference.Sequence(m)
        want = reference.logits(m, reference.prefill(m, prompt, seq))
        mode = "llama.cpp prefill"
        for _ in range(DECODE_STEPS + 1):
            got = np.array(llm.scores[llm.n_tokens - 1])
            worst[mode] = max(worst[mode], float(np.abs(got - want).max()))
            token, mode = int(np.argmax(got)), "llama.cpp decode"
            llm.eval([token])
            want = reference.logits(m, reference.forward(m, [token], seq)[-1])
    return worst


def llama_cpp_bindings(sdist):
    os.environ["LLAMA_CPP_LIB_PATH"] = os.path.join(sdist, "build", "bin")
    sys.path.insert(0, sdist)
    import llama_cpp
    return llama_cpp


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(tiny.MODELS), help="comma-separated names of tiny models")
    parser.add_argument("--chunk", type=int, default=7, help="prefill chunk size (tokens)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest |logit difference| allowed")
    parser.add_argument("--llama-cpp", metavar="SDIST", help="the llama-cpp-python sdist folder, its llama.cpp "
                        "built as a shared library in SDIST/build (see above): compare llama.cpp on the GGUFs too")
    args = parser.parse_args()
    bindings = llama_cpp_bindings(args.llama_cpp) if args.llama_cpp else None
    rng = random.Random(17)
    prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47)]
    print(f"torch {torch.__version__}; fast kernels blocked: {', '.join(FAST_KERNELS)}")
    failed = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            worst = compare(name, work, prompts, args.chunk)
            if bindings:
                gguf_path = os.path.join(work, name + ".gguf")
                tiny.write_gguf(gguf_path, name, tiny.random_weights(name))
                worst.update(llama_cpp_worst(bindings, gguf_path, reference.load_gguf(gguf_path), prompts))
            print(f"{name:14s} " + "  ".join(f"{mode}: {value:.2e}" for mode, value in worst.items()))
            failed += [name] if max(worst.values()) > args.tolerance else []
    if failed:
        raise SystemExit(f"above {args.tolerance}: {', '.join(failed)}")


if __name__ == "__main__":
    main()
