"""The OpenAI batch input and output forms end to end (tiny-spm, --chat-template llama2 for chat lines):
/v1/completions equals the simple form's result, which is the float64 reference's greedy golden,
/v1/chat/completions renders the template and stops on its end of turn, a bad line gets a status-400 error
line with its custom_id, and exit status 2. Penalties change greedy output (the golden without them) and
reduce repeats (the exact values are checked against a numpy reference in test_smollm2_reference.py)."""
import collections
import json
import os

from common import Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
GOLDEN = {g["prompt"]: g for g in read_jsonl(os.path.join(os.path.dirname(MODEL[1]), "golden", "greedy.jsonl"))}
DREAM = GOLDEN["I dreamed of"]  # runs to the full context: no EOS in its first 60 tokens
c = Checks()
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

# The chat prompt is the llama2 rendering: its token count equals `tokenize` of the same messages.
proc = run(["tokenize", "--model", MODEL[1], "--chat-template", "llama2"],
           stdin=json.dumps({"messages": rows[2]["body"]["messages"]}) + "\n")
rendered = json.loads(proc.stdout)
c.check(rendered["text"] == "<s>[INST] Tell me a dream. [/INST]", f"rendered {rendered['text']!r}")
c.check(chat_body["usage"]["prompt_tokens"] == len(rendered["ids"]), "chat prompt tokens")

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
