"""logit_bias (OpenAI's and vLLM's): a bias in [-100, 100] added to a token's logit before penalties and
sampling, greedy included, on a tiny random-weight model (no test data needed). Checks: +100 makes the
token the only greedy choice; -100 on the greedy token moves the choice; a sampled request biased to two
tokens draws only those; logprobs stay the raw model's (vLLM V1's default, as for penalties); the same
outputs across modes and n > 1; the OpenAI form; bad entries are error lines at their line, the rest runs;
best_of > 1 is refused."""
import os

from common import Checks, read_jsonl, run, tiny_dummy_model, tmpdir, write_jsonl

work = tmpdir()
MODEL = tiny_dummy_model(work)
VOCAB = 320
c = Checks()


def run_rows(rows, extra=(), expect_rc=0):
    prompts, out = os.path.join(work, "p.jsonl"), os.path.join(work, "o.jsonl")
    write_jsonl(prompts, rows)
    run(["run", prompts, "-o", out] + MODEL + list(extra), expect_rc=expect_rc)
    return {r.get("custom_id", r.get("id")): r for r in read_jsonl(out)}


base = {"prompt": "the quick brown fox", "max_tokens": 6, "temperature": 0, "ignore_eos": True, "logprobs": 3}
plain = run_rows([dict(base, id="plain")])["plain"]
first = plain["output_token_ids"][0]
forced = 77 if first != 77 else 78
others = [t for t in range(VOCAB) if t not in (5, 9)]
rows = [dict(base, id="plain"),
        dict(base, id="up", logit_bias={str(forced): 100}),
        dict(base, id="down", logit_bias={str(first): -100}),
        dict(base, id="zero", logit_bias={str(first): 0}),
        {"id": "two", "prompt": "the quick brown fox", "max_tokens": 40, "temperature": 1.0, "seed": 3,
         "ignore_eos": True, "logit_bias": {str(t): -100 for t in others}},
        {"id": "n3", "prompt": "the quick brown fox", "max_tokens": 4, "temperature": 0, "n": 3, "ignore_eos": True,
         "logit_bias": {str(forced): 100}},
        {"custom_id": "openai", "method": "POST", "url": "/v1/completions",
         "body": {"prompt": "the quick brown fox", "max_tokens": 3, "temperature": 0, "logit_bias": {str(forced): 100}}},
        dict(base, id="outside", logit_bias={str(VOCAB): 1}),
        dict(base, id="range", logit_bias={"3": -101}),
        dict(base, id="best_of", n=2, best_of=3)]
res = run_rows(rows, expect_rc=2)
c.check(res["plain"]["output_token_ids"] == plain["output_token_ids"], "an unbiased line is unchanged")
c.check(res["up"]["output_token_ids"] == [forced] * 6, f"+100: {res['up']['output_token_ids']}")
c.check(res["down"]["output_token_ids"][0] != first, f"-100 on the greedy token: {res['down']['output_token_ids']}")
c.check(res["zero"]["output_token_ids"] == plain["output_token_ids"], "a zero bias changes nothing")
drawn = set(res["two"]["output_token_ids"])
c.check(drawn <= {5, 9} and len(drawn) == 2, f"biased to two tokens, drew {sorted(drawn)}")
c.check(all(o["output_token_ids"] == [forced] * 4 for o in res["n3"]["outputs"]), f"n = 3: {res['n3']['outputs']}")
c.check(res["openai"]["response"]["body"]["choices"][0]["text"] != "" and
        res["openai"]["response"]["status_code"] == 200, f"OpenAI form: {res['openai']}")
# Logprobs are the raw model's: the forced token's entry is its unbiased log-probability, and the top
# alternatives at the first position are the unbiased run's.
up_first = res["up"]["logprobs"][0]
c.check(up_first["top"] == plain["logprobs"][0]["top"], "logprobs' top list is the raw model's")
c.check(up_first["logprob"] < plain["logprobs"][0]["logprob"], "the forced token keeps its raw (lower) logprob")
for key, needle in (("outside", f"field 'logit_bias' names token {VOCAB}, outside the vocabulary [0, {VOCAB})"),
                    ("range", "field 'logit_bias[\"3\"]' must be a number in [-100, 100] (got -101)"),
                    ("best_of", "field 'best_of' is not supported (got 3)")):
    message = (res[key].get("error") or {}).get("message", "")
    c.check(needle in message, f"{key}: {message!r} lacks {needle!r}")

# The same tokens in every mode and with a small budget.
biased = [r for r in rows if r.get("id") in ("up", "down", "two", "n3")]
want = run_rows(biased)
for name, extra in (("static", ["--mode", "static"]), ("sequential", ["--mode", "sequential"]),
                    ("budget 3", ["--max-num-batched-tokens", "3"])):
    got = run_rows(biased, extra)
    for key in ("up", "down", "two"):
        c.check(got[key]["output_token_ids"] == want[key]["output_token_ids"], f"{name}: {key} differs")
    c.check(got["n3"]["outputs"] == want["n3"]["outputs"], f"{name}: n3 differs")
c.done()
