"""logprobs and prompt_logprobs on the CPU backend against a float64 reference (logprob_reference.py):
tiny-spm over every mode, a token budget that cuts prompts into chunks, a small KV cache that preempts,
the prefix cache (prompts sharing blocks), n > 1, penalties and a regex constraint (logprobs are of the raw
logits), sampled and greedy rows, k from 0 to above the vocabulary, max_tokens 0 (scoring only) and OpenAI
completions with echo; chunked prompts score exactly like one chunk; SmolLM2 greedy and sampled in every
mode and in chunks of 8, and its chat logprobs; error lines for bad k and chat echo; the peak memory of
scoring a full-context prompt over a 128k vocabulary stays bounded."""
import json
import os
import random
import subprocess
import sys

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

from common import BIN, EXACT, Checks, need_modules, read_jsonl, run, tiny_dummy_model, tiny_spm_gguf, tmpdir, write_jsonl

need_modules("numpy", "gguf")
from logprob_reference import EntryChecker, reference_logprobs  # noqa: E402
from reference_llama import GgufLlama  # noqa: E402

SANITIZED = os.environ.get("CBATCH_SANITIZED") == "1"
c = Checks()
work = tmpdir()
checker = EntryChecker(c)


def peak_rss_mb(args):
    """Peak RSS of one cbatch run, measured in a fresh process (getrusage of its only child)."""
    code = ("import resource, subprocess, sys\n"
            "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
            "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, BIN] + args, capture_output=True, text=True, check=True).stdout
    rc, kb = out.split()
    c.check(rc == "0", f"memory run exited {rc}")
    return int(kb) / 1024


def check_memory():
    """A 2047-token prompt scored in one step over a 128,256-token vocabulary: all its (prompt, vocab) fp32
    logits would be 1 GB; the run may use at most 150 MB more than the same prompt generating one token."""
    if SANITIZED:
        print("memory check SKIPPED under the sanitizers (their shadow memory and quarantine dwarf the logits)")
        return
    model = tiny_dummy_model(work, vocab_size=128256, max_position_embeddings=2048, hidden_size=32,
                             intermediate_size=64, num_attention_heads=2, num_key_value_heads=1)
    rng = random.Random(5)
    ids = [rng.randrange(3, 128256) for _ in range(2047)]
    scored, plain = os.path.join(work, "mem_scored.jsonl"), os.path.join(work, "mem_plain.jsonl")
    write_jsonl(scored, [{"id": 0, "prompt_token_ids": ids, "max_tokens": 0, "prompt_logprobs": 5}])
    write_jsonl(plain, [{"id": 0, "prompt_token_ids": ids, "max_tokens": 1}])
    common = model + ["--max-num-batched-tokens", "2048", "--max-num-seqs", "1", "-o", "-"]
    with_lp, without = peak_rss_mb(["run", scored] + common), peak_rss_mb(["run", plain] + common)
    print(f"peak RSS scoring a 2047-token prompt, 128k vocabulary: {with_lp:.0f} MB (plain prefill {without:.0f} MB)")
    c.check(with_lp - without < 150, f"scoring took {with_lp - without:.0f} MB more than the plain prefill")


def tiny_spm_requests():
    rng = random.Random(7)
    prefix = [rng.randrange(3, 512) for _ in range(40)]
    rows = []
    cases = [  # (logprobs, prompt_logprobs, extra fields)
        (0, 0, {"temperature": 0}), (1, 3, {"temperature": 0}), (5, None, {"temperature": 1.0, "seed": 11}),
        (None, 5, {"temperature": 0}), (3, 2, {"temperature": 0, "repetition_penalty": 1.5, "frequency_penalty": 0.5}),
        (2, 1, {"temperature": 0.8, "top_k": 20, "seed": 3, "n": 2}), (None, 2, {"max_tokens": 0}),
        (600, 600, {"temperature": 0, "max_tokens": 2}), (4, 4, {"temperature": 0, "shared": True}),
        (4, 4, {"temperature": 0, "shared": True}),
        (3, None, {"temperature": 0, "structured_outputs": {"regex": "[a-z ]+"}}),
    ]
    for i, (lp, plp, extra) in enumerate(cases):
        extra = dict(extra)
        ids = prefix + [rng.randrange(3, 512) for _ in range(3)] if extra.pop("shared", False) else \
            [1] + [rng.randrange(3, 512) for _ in range(rng.randrange(4, 60))]
        row = {"id": i, "prompt_token_ids": ids, "max_tokens": 8, "ignore_eos": True, **extra}
        if lp is not None:
            row["logprobs"] = lp
        if plp is not None:
            row["prompt_logprobs"] = plp
        rows.append(row)
    return rows


def check_results(name, requests, results, model, tables):
    for req in requests:
        res = results[req["id"]]
        outputs = res["outputs"] if "outputs" in res else [res]
        for s, out in enumerate(outputs):
            ids = out["output_token_ids"]
            key = tuple(req["prompt_token_ids"] + ids)
            if key not in tables:
                tables[key] = reference_logprobs(model, list(key))
            prompt_lp = res.get("prompt_logprobs") if s == 0 else None
            c.check(("logprobs" in out) == ("logprobs" in req), f"{name} request {req['id']}: logprobs present?")
            c.check(("prompt_logprobs" in res) == ("prompt_logprobs" in req), f"{name} request {req['id']}: prompt_logprobs present?")
            checker.result(f"{name} request {req['id']} sample {s}", req, ids, out.get("logprobs"), prompt_lp, tables[key])


def run_tiny_spm(model_path, reference):
    requests = tiny_spm_requests()
    path = os.path.join(work, "tiny-spm.jsonl")
    write_jsonl(path, requests)
    base = ["run", path, "--model", model_path, "--device", "cpu", "--quiet", "--threads", "2", "--max-logprobs", "600"]
    configs = {"continuous": [], "budget-16": ["--max-num-batched-tokens", "16"],
               "preempting": ["--block-size", "8", "--kv-cache-blocks", "24", "--max-num-batched-tokens", "32"],
               "no-prefix-cache": ["--no-enable-prefix-caching"],
               "static": ["--mode", "static"], "sequential": ["--mode", "sequential"]}
    if SANITIZED:
        configs = {k: configs[k] for k in ("continuous", "budget-16", "preempting")}
    tables, runs = {}, {}
    for name, extra in configs.items():
        out = os.path.join(work, f"tiny-spm-{name}.jsonl")
        summary = os.path.join(work, f"tiny-spm-{name}.summary.json")
        run(base + extra + ["-o", out, "--summary", summary])
        runs[name] = {r["id"]: r for r in read_jsonl(out)}
        if name == "preempting":
            with open(summary) as f:
                c.check(json.load(f)["preemptions"] > 0, "the small KV cache caused no preemption")
        if not SANITIZED:
            check_results(name, requests, runs[name], reference, tables)
    for name, results in runs.items():  # prompt logprobs never depend on chunks, budget or mode
        for req in requests:
            c.check(results[req["id"]].get("prompt_logprobs") == runs["continuous"][req["id"]].get("prompt_logprobs"),
                    f"{name} request {req['id']}: prompt_logprobs differ from the continuous run's")
    scored = runs["continuous"][6]
    c.check(scored["output_token_ids"] == [] and scored["finish_reason"] == "length" and
            len(scored["prompt_logprobs"]) == len(requests[6]["prompt_token_ids"]), "max_tokens 0: prompt scores only")
    c.check(len(runs["continuous"][7]["logprobs"][0]["top"]) == 512, "k above the vocabulary: the whole vocabulary")
    check_echo(model_path, requests[1], runs["continuous"][1])


def check_echo(model_path, simple_request, simple_result):
    """OpenAI completions with echo: the prompt's tokens (the first one without a logprob) then the
    completion's, the same values as the simple form's."""
    path, out = os.path.join(work, "echo.jsonl"), os.path.join(work, "echo-out.jsonl")
    body = {"prompt": simple_request["prompt_token_ids"], "max_tokens": 8, "temperature": 0, "logprobs": 1,
            "echo": True, "ignore_eos": True}
    write_jsonl(path, [{"custom_id": "e", "method": "POST", "url": "/v1/completions", "body": body}])
    run(["run", path, "-o", out, "--model", model_path, "--device", "cpu", "--quiet"])
    lp = read_jsonl(out)[0]["response"]["body"]["choices"][0]["logprobs"]
    want = [None] + [e["logprob"] for e in simple_result["prompt_logprobs"][1:] + simple_result["logprobs"]]
    c.check(lp["token_logprobs"] == want, f"echo token_logprobs {lp['token_logprobs']}\n  simple form {want}")
    n = len(want)
    c.check(len(lp["tokens"]) == n and len(lp["top_logprobs"]) == n and len(lp["text_offset"]) == n and
            lp["top_logprobs"][0] is None and all(len(t) <= 1 for t in lp["top_logprobs"][1:]), f"echo shape {lp}")


def check_errors(model_path):
    path, out = os.path.join(work, "bad.jsonl"), os.path.join(work, "bad-out.jsonl")
    rows = [{"id": "ok", "prompt": "a", "max_tokens": 2, "logprobs": 20},
            {"id": "neg", "prompt": "a", "logprobs": -1}, {"id": "float", "prompt": "a", "prompt_logprobs": 1.5},
            {"id": "big", "prompt": "a", "logprobs": 21}, {"id": "str", "prompt": "a", "logprobs": "5"},
            {"custom_id": "chat-echo", "method": "POST", "url": "/v1/chat/completions",
             "body": {"messages": [{"role": "user", "content": "a"}], "echo": True}},
            {"custom_id": "top-only", "method": "POST", "url": "/v1/chat/completions",
             "body": {"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}},
            {"custom_id": "cmpl-big", "method": "POST", "url": "/v1/completions", "body": {"prompt": "a", "logprobs": 99}}]
    write_jsonl(path, rows)
    run(["run", path, "-o", out, "--model", model_path, "--device", "cpu", "--quiet"], expect_rc=2)
    lines = read_jsonl(out)
    errors = {str(r.get("custom_id", r.get("id"))): r["error"]["message"] for r in lines if r.get("error")}
    want = {"neg": "'logprobs'", "float": "'prompt_logprobs'", "big": "'logprobs'", "str": "'logprobs'",
            "chat-echo": "'body.echo'", "top-only": "'body.top_logprobs'", "cmpl-big": "'body.logprobs'"}
    c.check(set(errors) == set(want), f"error lines for {sorted(errors)}, expected {sorted(want)}")
    for key, field in want.items():
        c.check(field in errors.get(key, ""), f"{key}: error {errors.get(key)!r} does not name {field}")
    c.check(any(r.get("id") == "ok" and len(r["logprobs"][0]["top"]) == 20 for r in lines), "the good line ran")


def run_smollm2():
    from common import SMOLLM2
    if not os.path.exists(SMOLLM2):
        print(f"SmolLM2 part SKIPPED: {SMOLLM2} not found")
        return
    need_modules("tokenizers")
    from hf_reference import hf_tokenizer_from_gguf
    tokenizer = hf_tokenizer_from_gguf(SMOLLM2)
    texts = ["The three primary colors are", "Paris is the capital of", "def add(a, b):\n    return"]
    requests = []
    for i, t in enumerate(texts):
        ids = tokenizer.encode(t, add_special_tokens=False).ids
        requests.append({"id": i, "prompt_token_ids": ids, "max_tokens": 6, "logprobs": 5, "prompt_logprobs": 3,
                         "ignore_eos": True, **({"temperature": 0} if i != 1 else {"seed": 4})})
    path = os.path.join(work, "smollm2.jsonl")
    write_jsonl(path, requests)
    reference, tables, runs = None if SANITIZED else GgufLlama(SMOLLM2), {}, {}
    configs = {"continuous": [], "budget-8": ["--max-num-batched-tokens", "8"], "static": ["--mode", "static"],
               "sequential": ["--mode", "sequential"]}
    for name, extra in configs.items():
        out = os.path.join(work, f"smollm2-{name}.jsonl")
        run(["run", path, "-o", out, "--model", SMOLLM2, "--device", "cpu", "--quiet", "--threads", "2"] + EXACT + extra)
        runs[name] = {r["id"]: r for r in read_jsonl(out)}
        if not SANITIZED:
            check_results(f"SmolLM2 {name}", requests, runs[name], reference, tables)
    for name in configs:
        c.check(all(runs[name][i]["prompt_logprobs"] == runs["continuous"][i]["prompt_logprobs"] for i in range(3)),
                f"SmolLM2 {name}: prompt_logprobs differ from the continuous run's (one chunk)")
    check_chat(SMOLLM2)


def check_chat(model):
    """OpenAI chat logprobs: one content entry per completion token with its top_logprobs and bytes, the same
    values as the simple form's `messages` request (same ids), the greedy token first among the top."""
    messages = [{"role": "user", "content": "Name a color."}]
    path, out = os.path.join(work, "chat.jsonl"), os.path.join(work, "chat-out.jsonl")
    body = {"messages": messages, "max_tokens": 6, "temperature": 0, "logprobs": True, "top_logprobs": 3}
    write_jsonl(path, [{"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": body},
                       {"id": "s", "messages": messages, "max_tokens": 6, "temperature": 0, "logprobs": 3},
                       {"id": "eos", "messages": [{"role": "user", "content": "Say yes or no."}], "max_tokens": 3,
                        "temperature": 0, "logprobs": 0, "structured_outputs": {"choice": ["yes", "no"]}}])
    run(["run", path, "-o", out, "--model", model, "--device", "cpu", "--quiet"])
    lines = read_jsonl(out)
    chat = next(r for r in lines if r.get("custom_id") == "c")["response"]["body"]
    simple = next(r for r in lines if r.get("id") == "s")
    content = chat["choices"][0]["logprobs"]["content"]
    c.check(len(content) == chat["usage"]["completion_tokens"] == len(simple["logprobs"]),
            f"chat: {len(content)} content entries for {chat['usage']['completion_tokens']} tokens")
    for e, s in zip(content, simple["logprobs"]):
        c.check(e["logprob"] == s["logprob"] and e["token"] == s["token"] and
                [t["logprob"] for t in e["top_logprobs"]] == [t["logprob"] for t in s["top"]], f"chat {e} vs simple {s}")
        c.check(len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["logprob"] == e["logprob"], f"chat top {e}")
        c.check(e["token"].startswith("bytes:") or bytes(e["bytes"]) == e["token"].encode(), f"chat bytes {e}")
    # The choice ends on the end-of-turn token, which adds no text: shown as its vocabulary text.
    eos = next(r for r in lines if r.get("id") == "eos")
    c.check(eos["finish_reason"] == "stop" and eos["logprobs"][-1]["token"] == "<|im_end|>", f"end of turn shown as {eos}")


check_memory()
tiny_spm = tiny_spm_gguf()
run_tiny_spm(tiny_spm, GgufLlama(tiny_spm))
check_errors(tiny_spm)
run_smollm2()
print(f"{checker.entries} entries checked, largest difference from the float64 reference {checker.worst:.2e}")
c.done()
