"""--kv-cache-dtype on the CPU: bfloat16 holds K and V in half the bytes (the summary's KV blocks double under
the same memory), float32 in fp32. auto is bfloat16 where K and V come out of 8-bit products (quantized
weights with --cpu-precision fast) and float32 otherwise (fp32 weights, --cpu-precision exact), so the
float64-reference tests keep an fp32 cache. With bfloat16, greedy and seeded outputs and their logprobs are
bit-identical across modes, token budgets, block sizes (runs of keys shorter and longer than a vector) and
prefix caching with a cache small enough to evict and preempt, on head sizes of the AVX-512 kernel (64) and
of the portable loop (16); the logprobs differ from float32's (the rounding happened) but stay close. Bad
values exit 1 naming the flag. On the real models, bf16's greedy agreement with fp32 is printed (not asserted
to be 100%: a rounding flips near-ties)."""
import json
import os
import random

from common import GEMMA3, SMOLLM2, Checks, greedy_agreement, read_jsonl, run, tiny_dummy_model, tmpdir, write_jsonl

work = tmpdir()
c = Checks()

rng = random.Random(31)
prefixes = [[rng.randrange(3, 320) for _ in range(n)] for n in (7, 16, 40, 97)]
rows = []
for i in range(36):
    prefix = prefixes[i % len(prefixes)] if i % 5 else []
    row = {"id": f"r{i}", "prompt_token_ids": [1] + prefix + [rng.randrange(3, 320) for _ in range(rng.randint(1, 30))],
           "max_tokens": rng.randint(1, 24), "logprobs": 2, "ignore_eos": True}
    row.update({"temperature": 0.8, "seed": i} if i % 3 == 1 else {"temperature": 0})
    rows.append(row)
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, rows)


def outputs(model, *extra):
    out = os.path.join(work, "out.jsonl")
    run(["run", prompts, "-o", out] + model + list(extra))
    got = {r["id"]: (r["output_token_ids"], r["logprobs"]) for r in read_jsonl(out)}
    c.check(len(got) == len(rows), f"{' '.join(extra)}: {len(got)} results for {len(rows)} requests")
    return got


def kv_blocks(model, *extra):
    """The KV cache's blocks when memory, not the context, sets them (a context of 2^20 positions)."""
    summary = os.path.join(work, "summary.json")
    run(["run", one, "-o", os.path.join(work, "one-out.jsonl"), "--summary", summary] + model + list(extra))
    return json.load(open(summary))["kv_blocks_total"]


one = os.path.join(work, "one.jsonl")
write_jsonl(one, [{"prompt_token_ids": [1, 5, 9], "max_tokens": 2}])


def token_logprobs(result):
    return [entry["logprob"] for entry in result[1]]


for head_dim in (64, 16):
    q8 = tiny_dummy_model(work, hidden_size=4 * head_dim) + ["--dummy-dtype", "q8_0"]
    name = f"head_dim {head_dim}"
    auto = outputs(q8)
    bf16, f32 = outputs(q8, "--kv-cache-dtype", "bfloat16"), outputs(q8, "--kv-cache-dtype", "float32")
    c.check(auto == bf16, f"{name}: auto with 8-bit products is not the bfloat16 cache")
    long_dir = os.path.join(work, f"long-{head_dim}")  # its own config file beside q8's
    os.makedirs(long_dir)
    long = tiny_dummy_model(long_dir, hidden_size=4 * head_dim, max_position_embeddings=1 << 20)
    blocks = {what: kv_blocks(long + extra) for what, extra in (
        ("auto", ["--dummy-dtype", "q8_0"]), ("bfloat16", ["--dummy-dtype", "q8_0", "--kv-cache-dtype", "bfloat16"]),
        ("float32", ["--dummy-dtype", "q8_0", "--kv-cache-dtype", "float32"]),
        ("exact", ["--dummy-dtype", "q8_0", "--cpu-precision", "exact"]), ("fp32 weights", []))}
    c.check(blocks["auto"] == blocks["bfloat16"] == 2 * blocks["float32"] and
            blocks["exact"] == blocks["fp32 weights"] == blocks["float32"], f"{name}: KV blocks {blocks}")
    greedy = [k for k, r in zip(bf16, rows) if r["temperature"] == 0]
    moved = sum(token_logprobs(bf16[k]) != token_logprobs(f32[k]) for k in greedy)
    c.check(moved > 0, f"{name}: bfloat16 and float32 give the same logprobs everywhere: nothing was rounded")
    same_tokens = [k for k in greedy if bf16[k][0] == f32[k][0]]
    worst = max((abs(a - b) for k in same_tokens for a, b in zip(token_logprobs(bf16[k]), token_logprobs(f32[k]))),
                default=0.0)
    c.check(worst < 0.1, f"{name}: a logprob moves by {worst} between bfloat16 and float32")
    print(f"{name}: bf16 vs fp32 cache, {len(same_tokens)}/{len(greedy)} greedy outputs identical, logprobs "
          f"{moved} of them moved, by at most {worst:.2e}")
    exact = outputs(q8, "--cpu-precision", "exact")
    c.check(exact == outputs(q8, "--cpu-precision", "exact", "--kv-cache-dtype", "float32"),
            f"{name}: auto with exact products is not float32")

    for extra in (["--mode", "static", "--max-num-seqs", "7"], ["--mode", "sequential"],
                  ["--max-num-batched-tokens", "16", "--block-size", "5"],
                  ["--max-num-batched-tokens", "37", "--block-size", "32", "--max-num-seqs", "5"],
                  ["--block-size", "1", "--max-num-batched-tokens", "64"],
                  ["--block-size", "4", "--kv-cache-blocks", "60", "--max-num-seqs", "16"],
                  ["--no-enable-prefix-caching", "--block-size", "16"]):
        got = outputs(q8, *extra)
        diff = [k for k in bf16 if got.get(k) != bf16[k]]
        c.check(not diff, f"{name}, bfloat16, {' '.join(extra)}: {len(diff)} outputs differ, e.g. {diff[:3]}")

for args, says in ((["--kv-cache-dtype", "float16"], "float16"),
                   (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype fp8")):
    proc = run(["run", prompts, "-o", os.path.join(work, "bad.jsonl")] + tiny_dummy_model(work) + args, check=False)
    c.check(proc.returncode == 1 and says in proc.stderr,
            f"{' '.join(args)}: exit {proc.returncode}, expected 1 with a message naming {says!r}: {proc.stderr[-300:]}")


def agreement(model, name):
    """Greedy tokens with a bf16 cache vs an fp32 one: the share before each request's first difference."""
    agreed, total, identical, requests = greedy_agreement(model, work, ["--kv-cache-dtype", "bfloat16"],
                                                ["--kv-cache-dtype", "float32"])
    print(f"{name}: bf16 vs fp32 KV cache greedy agreement {agreed}/{total} tokens before the first difference "
          f"({100.0 * agreed / total:.1f}%), {identical}/{requests} requests identical")
    c.check(agreed >= total // 4, f"{name}: the bf16 cache agrees on only {agreed}/{total} tokens")


agreement(SMOLLM2, "SmolLM2-135M Q4_1")
agreement(GEMMA3, "Gemma 3 270M Q4_K_M")
c.done()
