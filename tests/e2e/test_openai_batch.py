"""The OpenAI batch input and output forms end to end (tiny-spm, --chat-template llama2 for chat lines):
/v1/completions equals the simple form's result, which is the float64 reference's greedy golden,
/v1/chat/completions renders the template and stops on its end of turn, a bad line gets a status-400 error
line with its custom_id, and exit status 2. Penalties change greedy output (the golden without them) and
reduce repeats (the exact values are checked against a numpy reference in test_smollm2_reference.py).
A list of prompts gives one choice per prompt and sample. Every kind of body (completion, chat, n > 1,
lists, logprobs, echo, reasoning split) is read with the openai package's own types (pydantic)."""
import collections
import json
import os

from common import Checks, need_modules, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

(openai,) = need_modules("openai")
import openai.types.chat  # noqa: E402  (the package's own response types: the format follows the real client)
import pydantic  # noqa: E402  (an openai dependency)

OPENAI_TYPES = {"text_completion": openai.types.Completion, "chat.completion": openai.types.chat.ChatCompletion}

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
GOLDEN = {g["prompt"]: g for g in read_jsonl(os.path.join(os.path.dirname(MODEL[1]), "golden", "greedy.jsonl"))}
DREAM = GOLDEN["I dreamed of"]  # runs to the full context: no EOS in its first 60 tokens
c = Checks()


def check_openai_body(line, allowed=()):
    """The line's body read by the openai package's type for its object (pydantic: a missing field, a wrong
    type or a finish_reason outside the client's literals fails). `allowed`: the error locations expected
    (the first echoed prompt token's null logprob, which OpenAI's API and vLLM write but the client's
    Logprobs type declares as a float)."""
    body = line["response"]["body"]
    kind = OPENAI_TYPES.get(body.get("object"))
    if kind is None:
        return c.check(False, f"{line['custom_id']}: no openai type for object {body.get('object')!r}")
    try:
        parsed = kind.model_validate(body)
        c.check(not allowed and len(parsed.choices) == len(body["choices"]) and parsed.usage is not None,
                f"{line['custom_id']}: parsed, expected errors at {allowed}")
    except pydantic.ValidationError as e:
        locations = tuple(".".join(map(str, err["loc"])) for err in e.errors())
        c.check(locations == allowed, f"{line['custom_id']}: not a valid {kind.__name__}: {e}")


work = tmpdir()
prompts, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")

rows = [
    {"id": "simple", "prompt": "I dreamed of", "max_tokens": 24, "temperature": 0},
    {"custom_id": "cmpl", "method": "POST", "url": "/v1/completions",
     "body": {"model": "m", "prompt": "I dreamed of", "max_tokens": 24, "temperature": 0}},
    {"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": "m", "messages": [{"role": "user", "content": "Tell me a dream."}], "max_tokens": 100,
              "temperature": 0}},
    {"custom_id": "bad", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "max_tokens": 5}},
]
write_jsonl(prompts, rows)
run(["run", prompts, "-o", out, "--ordered", "--chat-template", "llama2"] + MODEL, expect_rc=2)
res = read_jsonl(out)
c.check(len(res) == 4, f"{len(res)} output lines")
simple, cmpl, chat, bad = res
c.check(cmpl["custom_id"] == "cmpl" and cmpl["error"] is None and cmpl["response"]["status_code"] == 200, "completion line")
body = cmpl["response"]["body"]
c.check(body["object"] == "text_completion" and body["choices"][0]["text"] == simple["text"], "completion text = simple text")
c.check(simple["output_token_ids"] == DREAM["output_ids"][:24] and DREAM["output_text"].startswith(simple["text"]),
        f"simple: {simple['output_token_ids']} is not the golden's first 24 ids")
c.check(body["usage"] == {"prompt_tokens": simple["prompt_tokens"], "completion_tokens": simple["completion_tokens"],
                          "total_tokens": simple["prompt_tokens"] + simple["completion_tokens"],
                          "prompt_tokens_details": {"cached_tokens": simple["cached_tokens"]}}, f"usage {body['usage']}")
chat_body = chat["response"]["body"]
c.check(chat_body["object"] == "chat.completion" and chat_body["choices"][0]["message"]["role"] == "assistant", "chat line")
c.check(chat_body["choices"][0]["finish_reason"] in ("stop", "length"), "chat finish_reason")
c.check(bad["custom_id"] == "bad" and bad["response"]["status_code"] == 400 and bad["response"]["body"] is None, "error line")
c.check("prompt" in bad["error"]["message"], f"error names the field: {bad['error']}")
for line in (cmpl, chat):
    check_openai_body(line)

# The chat prompt is the llama2 rendering: its token count equals `tokenize` of the same messages.
proc = run(["tokenize", "--model", MODEL[1], "--chat-template", "llama2"],
           stdin=json.dumps({"messages": rows[2]["body"]["messages"]}) + "\n")
rendered = json.loads(proc.stdout)
c.check(rendered["text"] == "<s>[INST] Tell me a dream. [/INST]", f"rendered {rendered['text']!r}")
c.check(chat_body["usage"]["prompt_tokens"] == len(rendered["ids"]), "chat prompt tokens")

# A list of prompts (strings, or lists of ids): one choice per prompt and sample, index = prompt * n + sample,
# each prompt's choices equal to its own single-prompt line's, usage summed over the prompts.
listed = ["I dreamed of", "Once upon a time", "The city was made of paper, and"]
ids_listed = [GOLDEN[p]["prompt_ids"] for p in listed[:2]]
cmpl = lambda cid, **body: {"custom_id": cid, "method": "POST", "url": "/v1/completions",
                            "body": dict({"model": "m", "max_tokens": 6, "temperature": 0}, **body)}
rows = [cmpl(f"one{i}", prompt=p) for i, p in enumerate(listed)] + [
    cmpl("list", prompt=listed, n=2),
    cmpl("ids", prompt=ids_listed),
    cmpl("sampled", prompt=listed[:2], n=3, temperature=1.0, seed=7),
    cmpl("sampled-one", prompt=listed[1], n=3, temperature=1.0, seed=7),
    cmpl("unseeded", prompt=[listed[0]] * 4, temperature=1.0, max_tokens=12),
    cmpl("mixed", prompt=["I dreamed of", 5]),
    cmpl("bad-id", prompt=[[1, 284], [1, 99999]]),
    cmpl("echo", prompt=listed, echo=True),
]
write_jsonl(prompts, rows)
run(["run", prompts, "-o", out, "--max-num-seqs", "4", "--max-num-batched-tokens", "16"] + MODEL, expect_rc=2)
got = {r["custom_id"]: r for r in read_jsonl(out)}
single = [got[f"one{i}"]["response"]["body"] for i in range(len(listed))]
body = got["list"]["response"]["body"]
c.check([ch["index"] for ch in body["choices"]] == list(range(6)), f"list indices {[ch['index'] for ch in body['choices']]}")
for p in range(len(listed)):
    for i in range(2):
        c.check(body["choices"][p * 2 + i]["text"] == single[p]["choices"][0]["text"], f"list choice {p * 2 + i} text")
c.check(body["usage"]["prompt_tokens"] == sum(len(GOLDEN[p]["prompt_ids"]) for p in listed) ==
        sum(b["usage"]["prompt_tokens"] for b in single), f"list usage {body['usage']}")
c.check(body["usage"]["completion_tokens"] == 2 * sum(b["usage"]["completion_tokens"] for b in single),
        f"list completion tokens {body['usage']}")
ids_body = got["ids"]["response"]["body"]
c.check([ch["text"] for ch in ids_body["choices"]] == [b["choices"][0]["text"] for b in single[:2]], "id lists = strings")
sampled, sampled_one = (got[k]["response"]["body"]["choices"] for k in ("sampled", "sampled-one"))
c.check(len(sampled) == 6 and len({ch["text"] for ch in sampled[3:]}) > 1, "sampled list: 6 distinct choices")
c.check([ch["text"] for ch in sampled[3:]] == [ch["text"] for ch in sampled_one],
        "the second prompt's samples (seed 7) equal its own line's")
# Without a seed the prompts of a list draw apart: prompt p as sample p of the same line with n = prompts.
unseeded = [ch["text"] for ch in got["unseeded"]["response"]["body"]["choices"]]
c.check(len(set(unseeded)) > 1, f"a list of one prompt 4 times, no seed: the prompts draw apart {unseeded}")
write_jsonl(prompts, [cmpl("unseeded", prompt=listed[0], n=4, temperature=1.0, max_tokens=12)])
run(["run", prompts, "-o", out] + MODEL)
as_samples = [ch["text"] for ch in read_jsonl(out)[0]["response"]["body"]["choices"]]
c.check(unseeded == as_samples, f"the list's draws {unseeded} equal n = 4 samples' {as_samples}")
for key in [f"one{i}" for i in range(len(listed))] + ["list", "ids", "sampled", "sampled-one", "unseeded"]:
    check_openai_body(got[key])
for key, words in [("mixed", "body.prompt[1]"), ("bad-id", "body.prompt[1]"), ("echo", "echo")]:
    c.check(got[key]["response"]["status_code"] == 400 and words in got[key]["error"]["message"],
            f"{key}: {got[key]['error']}")

# The bodies with logprobs (completions: tokens and top alternatives, echo; chat: content entries) and with
# a reasoning split are valid for the client too.
chat = lambda cid, **body: {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                            "body": dict({"model": "m", "max_tokens": 6, "temperature": 0,
                                          "messages": [{"role": "user", "content": "Tell me a dream."}]}, **body)}
rows = [cmpl("lp", prompt="I dreamed of", logprobs=2), cmpl("lp-echo", prompt="I dreamed of", logprobs=1, echo=True),
        cmpl("lp-n", prompt=listed[:2], logprobs=1, n=2, temperature=0.8, seed=3),
        chat("chat-lp", logprobs=True, top_logprobs=2), chat("chat-n", n=2, temperature=0.8, seed=3)]
write_jsonl(prompts, rows)
for extra in ([], ["--reasoning-parser", "qwen3"]):
    run(["run", prompts, "-o", out, "--chat-template", "llama2"] + MODEL + extra)
    got = {r["custom_id"]: r for r in read_jsonl(out)}
    c.check(len(got) == len(rows) and all(r["error"] is None for r in got.values()), f"logprob lines {extra}")
    for key, line in got.items():
        echo_null = ("choices.0.logprobs.token_logprobs.0", "choices.0.logprobs.top_logprobs.0")
        check_openai_body(line, echo_null if key == "lp-echo" else ())
    first = got["lp-echo"]["response"]["body"]["choices"][0]["logprobs"]
    c.check(first["token_logprobs"][0] is None and first["top_logprobs"][0] is None, "echo: the first token has no logprob")
c.check(got["chat-lp"]["response"]["body"]["choices"][0]["logprobs"]["content"], "chat logprobs present")

# Penalties: greedy output changes and its most repeated token repeats less.
base = {"prompt": "I dreamed of", "max_tokens": 60, "temperature": 0}
variants = {"none": {}, "repetition": {"repetition_penalty": 1.5}, "frequency": {"frequency_penalty": 1.5},
            "presence": {"presence_penalty": 1.5}}
write_jsonl(prompts, [dict(base, id=name, **extra) for name, extra in variants.items()])
run(["run", prompts, "-o", out] + MODEL)
got = {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}
c.check(DREAM["max_tokens"] >= 60 and got["none"] == DREAM["output_ids"][:60], "no penalty: not the golden's 60 ids")
most = {name: collections.Counter(ids).most_common(1)[0][1] for name, ids in got.items()}
for name in ["repetition", "frequency", "presence"]:
    c.check(got[name] != got["none"], f"{name} penalty changes the output")
    c.check(most[name] < most["none"], f"{name} penalty: most repeated token {most[name]}x, without {most['none']}x")
c.done()
