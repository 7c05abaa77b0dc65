"""--reasoning-parser on scripted tiny models (tiny_models.write_scripted: each emits a fixed token sequence
after its chat prompt), so the thinking is known exactly: <think> and </think> as special tokens (split by
id) and as plain added tokens (split by text), an R1-style template that opens <think> in the prompt, an
output without thinking, max_tokens inside the thinking, harmony channels (gpt_oss), the OpenAI batch and
plain forms, n > 1, chat_template_kwargs.enable_thinking, structured outputs that start after the thinking,
an unknown parser name; SmolLM3's template (its /think and /no_think modes); and that a parser changes only
the split, never the tokens."""
import json
import os
import time

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy")
import tiny_models  # noqa: E402 (needs numpy)

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
QWEN3 = CHATML.replace("{% endif %}", "{%- if enable_thinking is defined and enable_thinking is false %}"
                       "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{% endif %}") + "{# <tool_call> #}"
R1_OPENED = CHATML.replace("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\n<think>\\n'")
SMOLLM3 = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_templates", "smollm3.jinja"),
               encoding="utf-8").read()
HARMONY = "{{- '<|start|>system<|message|>' }}{# <|channel|>analysis #}{{- '<|start|>assistant' }}"
CHATML_SPECIAL = ["<|im_start|>", "<|im_end|>"]
HARMONY_SPECIAL = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"]

work = tmpdir()
models = {
    # <think> and </think> special: found by id, absent from the unsplit text.
    "think-id": tiny_models.write_scripted(
        os.path.join(work, "think-id"), ["\n", "<think>", "p", "l", "a", "n", "</think>", "Y", "e", "s", "!", "<|im_end|>"],
        special=CHATML_SPECIAL + ["<think>", "</think>"], chat_template=QWEN3),
    # Plain added tokens (Qwen3's are not special): found in the text; the template opens <think>.
    "r1-text": tiny_models.write_scripted(
        os.path.join(work, "r1-text"), ["\n", "w", "h", "y", "</think>", "O", "K", "<|im_end|>"],
        added=["<think>", "</think>"], special=CHATML_SPECIAL, chat_template=R1_OPENED),
    "no-think": tiny_models.write_scripted(
        os.path.join(work, "no-think"), ["\n", "H", "i", "!", "<|im_end|>"],
        special=CHATML_SPECIAL + ["<think>", "</think>"], chat_template=CHATML),
    # SmolLM3's template: its /think mode's generation prompt ends with "\n", after which the model thinks.
    "smollm3": tiny_models.write_scripted(
        os.path.join(work, "smollm3"), ["\n", "<think>", "p", "</think>", "Y", "<|im_end|>"],
        special=CHATML_SPECIAL + ["<think>", "</think>"], chat_template=SMOLLM3),
    # Harmony: the prompt ends with "<|start|>assistant"; an analysis message, then </s>.
    "harmony-analysis": tiny_models.write_scripted(
        os.path.join(work, "harmony-analysis"), ["assistant", "<|channel|>", "analysis", "<|message|>", "h", "m", "<|end|>"],
        added=["assistant", "analysis", "final"], special=HARMONY_SPECIAL, chat_template=HARMONY),
    # <|return|> and <|call|> must stop: without it "Z" would follow.
    "harmony-final": tiny_models.write_scripted(
        os.path.join(work, "harmony-final"), ["assistant", "<|channel|>", "final", "<|message|>", "O", "K", "<|return|>", "Z"],
        added=["assistant", "analysis", "final"], special=HARMONY_SPECIAL, chat_template=HARMONY),
    "harmony-call": tiny_models.write_scripted(
        os.path.join(work, "harmony-call"), ["assistant", "<|channel|>", "final", "<|message|>", "O", "K", "<|call|>", "Z"],
        added=["assistant", "analysis", "final"], special=HARMONY_SPECIAL, chat_template=HARMONY),
}
# SmolLM3's default system prompt is over 1,200 bytes: a longer context than write_scripted's 512.
config_path = os.path.join(work, "smollm3", "config.json")
config = json.load(open(config_path))
config["max_position_embeddings"] = 2048
json.dump(config, open(config_path, "w"))
t = Checks()
MESSAGES = [{"role": "user", "content": "hi"}]


def cbatch(model, rows, *flags, expect_rc=0):
    prompts, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
    write_jsonl(prompts, rows)
    if os.path.exists(out):
        os.remove(out)
    proc = run(["run", prompts, "-o", out, "--model", os.path.join(work, model), "--quiet", "--ordered", *flags],
               expect_rc=expect_rc)
    return read_jsonl(out) if expect_rc != 1 else proc  # 2: some lines are errors


def plain(max_tokens=32, **extra):
    return dict({"id": "a", "messages": MESSAGES, "max_tokens": max_tokens}, **extra)


def openai(max_tokens=32, **extra):
    return {"custom_id": "b", "method": "POST", "url": "/v1/chat/completions",
            "body": dict({"model": "m", "messages": MESSAGES, "max_tokens": max_tokens}, **extra)}


def message_of(row):
    return row["response"]["body"]["choices"][0]["message"]


# Each parser on each <think> model: the plain and OpenAI forms carry the same split.
CASES = [("think-id", "qwen3", "plan", "Yes!"), ("think-id", "deepseek_r1", "plan", "Yes!"),
         ("r1-text", "deepseek_r1", "why", "OK"), ("r1-text", "qwen3", "why", "OK"),
         ("no-think", "qwen3", None, "Hi!"), ("no-think", "deepseek_r1", None, "Hi!")]
for model, parser, reasoning, content in CASES:
    p, o = cbatch(model, [plain(), openai()], "--reasoning-parser", parser)
    name = f"{model} --reasoning-parser {parser}"
    t.check(p["text"] == content and p["reasoning_content"] == reasoning, f"{name}: plain form split {p}")
    m = message_of(o)
    t.check(m["content"] == content and m["reasoning_content"] == reasoning, f"{name}: OpenAI form split {m}")
    t.check(p["finish_reason"] == "stop", f"{name}: stops on the end of turn ({p['finish_reason']})")

# SmolLM3: in /think mode (the default) its thinking splits; /no_think, from the system message or from
# enable_thinking, ends the prompt with an empty think block instead.
p, o = cbatch("smollm3", [plain(), openai()], "--reasoning-parser", "qwen3")
t.check(p["reasoning_content"] == "p" and p["text"] == "Y" and p["finish_reason"] == "stop", f"smollm3 split: {p}")
t.check(message_of(o)["reasoning_content"] == "p" and message_of(o)["content"] == "Y", f"smollm3 OpenAI: {o}")
ids = models["smollm3"]
lines = [{"messages": MESSAGES}, {"messages": [{"role": "system", "content": "/no_think"}] + MESSAGES},
         {"messages": MESSAGES, "chat_template_kwargs": {"enable_thinking": False}}]
proc = run(["tokenize", "--model", os.path.join(work, "smollm3")], stdin="".join(json.dumps(x) + "\n" for x in lines))
on, *offs = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
t.check(on[-1] == ids["\n"] and on[-2] != ids["</think>"], f"smollm3 /think prompt: {on[-8:]}")
for off in offs:
    t.check(off[-5:] == [ids["<think>"], ids["\n"], ids["\n"], ids["</think>"], ids["\n"]],
            f"smollm3 /no_think prompt ends with an empty think block: {off[-8:]}")
# Its /think system prompt speaks of "<think> Thought section </think>": that does not close the thinking,
# so a structured output still starts after it.
p, = cbatch("smollm3", [plain(guided_choice=["Y", "N"])], "--reasoning-parser", "qwen3")
t.check(p["reasoning_content"] == "p" and p["text"] == "Y", f"smollm3 constrained after its thinking: {p}")

# The parser changes only the split: the same ids, counts and logprobs as without one; no split field then.
for model in ("think-id", "r1-text"):
    bare, = cbatch(model, [plain(logprobs=1)])
    split, = cbatch(model, [plain(logprobs=1)], "--reasoning-parser", "qwen3")
    t.check("reasoning_content" not in bare, f"{model}: no reasoning_content without a parser")
    t.check(bare["output_token_ids"] == split["output_token_ids"] and
            bare["completion_tokens"] == split["completion_tokens"], f"{model}: tokens changed by the parser")
    t.check([e["token_id"] for e in bare["logprobs"]] == [e["token_id"] for e in split["logprobs"]],
            f"{model}: logprobs changed by the parser")
unsplit, = cbatch("think-id", [plain()])
t.check(unsplit["text"] == "planYes!", f"special markers decode to nothing unsplit: {unsplit['text']!r}")
unsplit, = cbatch("r1-text", [plain()])
t.check(unsplit["text"] == "why</think>OK", f"plain markers stay in the unsplit text: {unsplit['text']!r}")

# max_tokens inside the thinking: all reasoning, empty content (opened in the output, or in the prompt).
for model, max_tokens, reasoning in (("think-id", 3, "pl"), ("r1-text", 2, "wh")):
    p, o = cbatch(model, [plain(max_tokens), openai(max_tokens)], "--reasoning-parser", "deepseek_r1")
    t.check(p["finish_reason"] == "length" and p["text"] == "" and p["reasoning_content"] == reasoning,
            f"{model}: unterminated thinking {p}")
    t.check(message_of(o)["content"] == "" and message_of(o)["reasoning_content"] == reasoning,
            f"{model}: unterminated thinking, OpenAI form {message_of(o)}")

# n > 1: every sample split.
p, = cbatch("think-id", [plain(n=3, temperature=1.0)], "--reasoning-parser", "qwen3")
t.check(len(p["outputs"]) == 3 and all(s["text"] == "Yes!" and s["reasoning_content"] == "plan" for s in p["outputs"]),
        f"n = 3: each sample split {p.get('outputs')}")
o, = cbatch("think-id", [openai(n=2, temperature=1.0)], "--reasoning-parser", "qwen3")
choices = o["response"]["body"]["choices"]
t.check([c["message"]["reasoning_content"] for c in choices] == ["plan", "plan"], f"n = 2 OpenAI choices {choices}")

# chat_template_kwargs reach the template: enable_thinking false closes an empty think block in the prompt.
on, off = cbatch("think-id", [plain(), dict(plain(), id="off", chat_template_kwargs={"enable_thinking": False})])
t.check(off["prompt_tokens"] == on["prompt_tokens"] + 6,
        f"enable_thinking false adds <think>\\n\\n</think>\\n\\n: {on['prompt_tokens']} -> {off['prompt_tokens']}")
bad = cbatch("think-id", [dict(plain(), chat_template_kwargs={"enable_thinking": "no"}), plain(reasoning_effort="max")],
             expect_rc=2)
t.check(all("error" in r for r in bad), f"bad chat_template_kwargs / reasoning_effort are error lines: {bad}")

# Harmony (gpt_oss): the analysis channel is the reasoning, the final channel the content.
p, = cbatch("harmony-analysis", [plain()], "--reasoning-parser", "gpt_oss")
t.check(p["reasoning_content"] == "hm" and p["text"] == "", f"harmony analysis only: {p}")
p, o = cbatch("harmony-final", [plain(), openai()], "--reasoning-parser", "gpt_oss")
t.check(p["reasoning_content"] is None and p["text"] == "OK" and p["finish_reason"] == "stop" and
        p["output_token_ids"][-1] == models["harmony-final"]["<|return|>"], f"harmony final stops on <|return|>: {p}")
t.check(message_of(o)["content"] == "OK", f"harmony final, OpenAI form: {message_of(o)}")
bare, = cbatch("harmony-final", [plain()])
t.check(bare["text"] == "finalOK" and bare["output_token_ids"] == p["output_token_ids"],
        f"harmony unsplit keeps the channel name, same ids: {bare}")

p, = cbatch("harmony-call", [plain()], "--reasoning-parser", "gpt_oss")
t.check(p["text"] == "OK" and p["output_token_ids"][-1] == models["harmony-call"]["<|call|>"], f"harmony <|call|> stops: {p}")

# The harmony rendering, as openai-harmony's guide writes a chat: system message with the reasoning effort
# (default medium), the first system message as developer instructions, final-channel assistant turns.
chat = [{"role": "system", "content": "Answer in riddles."}, {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "Four."}, {"role": "user", "content": "And 3 + 3?"}]
lines = [{"messages": chat, "reasoning_effort": "high"}, {"messages": chat[1:2]}]
proc = run(["tokenize", "--model", os.path.join(work, "harmony-final")], stdin="".join(json.dumps(x) + "\n" for x in lines))
high, medium = [json.loads(line) for line in proc.stdout.splitlines()]
system = ("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
          f"Current date: {time.strftime('%Y-%m-%d')}\n\nReasoning: {{}}\n\n# Valid channels: analysis, commentary, final. "
          "Channel must be included for every message.<|end|>")
want = (system.format("high") + "<|start|>developer<|message|># Instructions\n\nAnswer in riddles.<|end|>"
        "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>final<|message|>Four.<|end|>"
        "<|start|>user<|message|>And 3 + 3?<|end|><|start|>assistant")
t.check(high["text"] == want, f"harmony rendering:\n{high['text']!r}\nwant\n{want!r}")
t.check(medium["text"] == system.format("medium") + "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant",
        f"harmony rendering, default effort: {medium['text']!r}")
start_id = models["harmony-final"]["<|start|>"]
t.check(high["ids"].count(start_id) == 6, f"harmony special tokens are single ids: {high['ids']}")
proc = cbatch("think-id", [plain()], "--reasoning-parser", "gpt_oss", expect_rc=1)
t.check("<|channel|>" in proc.stderr, f"gpt_oss on a vocabulary without harmony tokens: {proc.stderr}")

# Structured outputs apply to the answer only: free thinking ("plan" is no choice), then a choice.
for form in (plain, openai):
    choice = {"guided_choice": ["yes", "no"]}
    with_parser, = cbatch("think-id", [form(**choice)], "--reasoning-parser", "qwen3")
    without, = cbatch("think-id", [form(**choice)])
    if form is plain:
        t.check(with_parser["reasoning_content"] == "plan" and with_parser["text"] in ("yes", "no"),
                f"constraint after the thinking: {with_parser}")
        t.check(without["text"] in ("yes", "no") and without["output_token_ids"][0] != with_parser["output_token_ids"][0],
                f"without a parser the constraint starts at once: {without}")
    else:
        m = message_of(with_parser)
        t.check(m["reasoning_content"] == "plan" and m["content"] in ("yes", "no"), f"OpenAI form, constrained: {m}")
regex, = cbatch("r1-text", [plain(guided_regex="[0-9]{2}")], "--reasoning-parser", "deepseek_r1")
t.check(regex["reasoning_content"] == "why" and len(regex["text"]) == 2 and regex["text"].isdigit(),
        f"regex after text-marker thinking: {regex}")

# An unknown parser: exit 1 before any request, naming the choices.
proc = cbatch("think-id", [plain()], "--reasoning-parser", "r2", expect_rc=1)
t.check("deepseek_r1, qwen3, gemma4, gpt_oss" in proc.stderr and "r2" in proc.stderr, f"unknown parser message: {proc.stderr}")
t.check(not os.path.exists(os.path.join(work, "out.jsonl")) or not read_jsonl(os.path.join(work, "out.jsonl")),
        "an unknown parser writes no result line")
t.done()
