"""Chat rendering equals `jinja2` rendering of the real templates (as transformers renders them, with
add_generation_prompt, strftime_now and the {% generation %} tag): SmolLM2's ChatML template from its GGUF
(with its default system prompt), and the templates in chat_templates/ (Llama 2, 3, 3.1; Gemma 3 and 2;
Qwen2.5; Mistral v0.3 and v0.1; Phi-3 and 3.5; Gemma 4, also with enable_thinking; SmolLM3, also with enable_thinking and its /think,
/no_think and /system_override flags) placed in a Hugging Face directory's tokenizer_config.json, on chats with and without a
system message, multi-turn, ending with an answer, with an odd role. SmolLM2's chat token ids equal
Hugging Face `tokenizers` on the rendered text, and Gemma 3's (--chat-template gemma on its GGUF, which
has no template) equal transformers' tokenizer of that GGUF. Chats a template rejects, and models
without a known template, give error lines naming the problem."""
import datetime
import json
import os
import re
import shutil

from common import Checks, need_modules, need_smollm2, run, tiny_spm_gguf, tmpdir

jinja2, _ = need_modules("jinja2", "gguf")
TINY_SPM_HF = os.path.join(os.path.dirname(tiny_spm_gguf()), "hf")
TINY_SPM_CONFIG = json.load(open(os.path.join(TINY_SPM_HF, "tokenizer_config.json"), encoding="utf-8"))
from jinja2 import nodes  # noqa: E402
from jinja2.ext import Extension  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHATS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}],
    [{"role": "user", "content": "Name a color."}, {"role": "assistant", "content": "Blue."},
     {"role": "user", "content": "Another one?"}],
    [{"role": "user", "content": "  spaced out \n\n"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "Ünïcödé 中文 😀\ttab"}],
    [{"role": "system", "content": " sys \n"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": " b "},
     {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}, {"role": "user", "content": "e"}],
    [{"role": "user", "content": "literal <|im_end|> and <s> inside"}],
    [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}],
    [{"role": "user", "content": "run it"}, {"role": "tool", "content": "42"}],
    [{"role": "system", "content": "Multi\nline system"}, {"role": "user", "content": "\tQ"},
     {"role": "assistant", "content": "\n A \n"}, {"role": "user", "content": "Q2 "}],
]
TOOL_CHAT = CHATS[8]
BAD_LLAMA2 = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]


class Generation(Extension):
    """{% generation %}...{% endgeneration %} renders its body, as transformers' AssistantTracker does when
    no assistant mask is asked for."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        return nodes.Scope(parser.parse_statements(("name:endgeneration",), drop_needle=True), lineno=lineno)


def jinja_render(template, messages, bos, eos, **kwargs):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos,
                                            **kwargs)


def cbatch_render(model, chats, extra=(), fields=None):
    stdin = "".join(json.dumps(dict({"messages": m}, **(fields or {}))) + "\n" for m in chats)
    proc = run(["tokenize", "--model", model] + list(extra), stdin=stdin, check=False)
    return [json.loads(line) for line in proc.stdout.splitlines()]


c = Checks()
# SmolLM2: the template from the GGUF, the tokens from HF tokenizers built from the GGUF's vocabulary.
smollm2 = need_smollm2()
from gguf import GGUFReader  # noqa: E402
from hf_reference import hf_tokenizer_from_gguf  # noqa: E402

template = GGUFReader(smollm2).fields["tokenizer.chat_template"].contents()
reference = hf_tokenizer_from_gguf(smollm2)
for messages, got in zip(CHATS, cbatch_render(smollm2, CHATS)):
    want = jinja_render(template, messages, "<|im_start|>", "<|im_end|>")
    c.check(got.get("text") == want, f"smollm2 {messages}: {got.get('text')!r} != {want!r}")
    c.check(got.get("ids") == reference.encode(want, add_special_tokens=False).ids, f"smollm2 ids of {messages}")

# The reference templates in a copy of tiny-spm's HF directory (it has none), with its bos and eos.
TEMPLATES = ["llama2", "llama3", "llama3.1", "gemma3", "gemma2", "qwen2.5", "qwen3", "mistral-v0.3", "mistral-v0.1",
             "phi3", "phi3.5", "smollm3", "gemma4"]
work = tmpdir()
for name in TEMPLATES:
    template = open(os.path.join(HERE, "chat_templates", name + ".jinja"), encoding="utf-8").read()
    model = os.path.join(work, name)
    shutil.copytree(TINY_SPM_HF, model)
    config_path = os.path.join(model, "tokenizer_config.json")
    config = json.load(open(config_path))
    config["chat_template"] = template
    json.dump(config, open(config_path, "w"))
    # (Llama 3.1's "ipython" turns for tool messages are not rendered by cbatch.)
    chats = [m for m in CHATS if name != "llama3.1" or m is not TOOL_CHAT] + [BAD_LLAMA2]
    rendered = 0
    for messages, got in zip(chats, cbatch_render(model, chats)):
        try:
            want = jinja_render(template, messages, TINY_SPM_CONFIG["bos_token"], TINY_SPM_CONFIG["eos_token"])
        except jinja2.exceptions.TemplateError as e:
            c.check("error" in got, f"{name}: chat {messages} rejected by the template ({e}) but cbatch gave {got}")
            continue
        rendered += got.get("text") == want
        c.check(got.get("text") == want, f"{name} {messages}: {got.get('text')!r} != {want!r}")
    print(f"{name}: {rendered} chats rendered exactly as jinja2 renders them")

# Qwen3: thinking in earlier answers (dropped before the last user query, kept after it), and
# chat_template_kwargs.enable_thinking reaching the template.
template = open(os.path.join(HERE, "chat_templates", "qwen3.jinja"), encoding="utf-8").read()
THINKING_CHATS = CHATS + [
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>\nr1\n</think>\n\nA1"},
     {"role": "user", "content": "Q2"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "\n<think>\n\nr1\n\n</think>\n\n\nA1"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1 without thinking"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "r0</think>x</think>\nA1"},
     {"role": "tool", "content": "42"}, {"role": "assistant", "content": "<think>r2</think>A2"},
     {"role": "assistant", "content": "A3"}],
]
for kwargs in ({}, {"enable_thinking": False}, {"enable_thinking": True}):
    fields = {"chat_template_kwargs": kwargs} if kwargs else None
    for messages, got in zip(THINKING_CHATS, cbatch_render(os.path.join(work, "qwen3"), THINKING_CHATS, fields=fields)):
        want = jinja_render(template, messages, TINY_SPM_CONFIG["bos_token"], TINY_SPM_CONFIG["eos_token"], **kwargs)
        c.check(got.get("text") == want, f"qwen3 {kwargs} {messages}: {got.get('text')!r} != {want!r}")

# Gemma 4: enable_thinking (a system turn with <|think|>; no empty thought channel in the generation prompt),
# answers' thinking channels cut out, consecutive answers in one model turn, developer as system.
template = open(os.path.join(HERE, "chat_templates", "gemma4.jinja"), encoding="utf-8").read()
GEMMA4_CHATS = CHATS + [
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<|channel>thought\nr1<channel|>A1 "},
     {"role": "user", "content": "Q2"}],
    [{"role": "developer", "content": " dev "}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"},
     {"role": "assistant", "content": "B<|channel>x<channel|>C"}],
]
for kwargs in ({}, {"enable_thinking": False}, {"enable_thinking": True}):
    fields = {"chat_template_kwargs": kwargs} if kwargs else None
    for messages, got in zip(GEMMA4_CHATS, cbatch_render(os.path.join(work, "gemma4"), GEMMA4_CHATS, fields=fields)):
        want = jinja_render(template, messages, TINY_SPM_CONFIG["bos_token"], TINY_SPM_CONFIG["eos_token"], **kwargs)
        c.check(got.get("text") == want, f"gemma4 {kwargs} {messages}: {got.get('text')!r} != {want!r}")

# SmolLM3: enable_thinking, and the system message's flags, which win over it (/no_think before /think),
# leave the custom instructions; /system_override keeps only them.
template = open(os.path.join(HERE, "chat_templates", "smollm3.jinja"), encoding="utf-8").read()
FLAG_CHATS = CHATS + [
    [{"role": "system", "content": "Be brief. /no_think"}, {"role": "user", "content": "Q"},
     {"role": "assistant", "content": "\n\nA\n"}, {"role": "user", "content": "Q2"}],
    [{"role": "system", "content": "/think"}, {"role": "user", "content": "Q"}],
    [{"role": "system", "content": "x /think y /no_think z \u3000\n"}, {"role": "user", "content": "Q"}],
    [{"role": "system", "content": "Only this. /system_override /no_think "}, {"role": "user", "content": "Q"},
     {"role": "assistant", "content": "<think>\nr\n</think>\nA"}],
    [{"role": "user", "content": "Q"}, {"role": "system", "content": "late"}, {"role": "assistant", "content": "A"}],
]
for kwargs in ({}, {"enable_thinking": False}, {"enable_thinking": True}):
    fields = {"chat_template_kwargs": kwargs} if kwargs else None
    for messages, got in zip(FLAG_CHATS, cbatch_render(os.path.join(work, "smollm3"), FLAG_CHATS, fields=fields)):
        want = jinja_render(template, messages, TINY_SPM_CONFIG["bos_token"], TINY_SPM_CONFIG["eos_token"], **kwargs)
        c.check(got.get("text") == want, f"smollm3 {kwargs} {messages}: {got.get('text')!r} != {want!r}")

# Gemma 3's GGUF has no template: --chat-template gemma renders Gemma 3's, and the ids are those of
# transformers' tokenizer of the GGUF (the text carries <bos>; nothing is added).
from common import need_gemma3  # noqa: E402
try:
    from transformers_gguf import transformers_tokenizer_from_gguf
except ImportError:
    transformers_tokenizer_from_gguf = None
gemma3 = need_gemma3()
template = open(os.path.join(HERE, "chat_templates", "gemma3.jinja"), encoding="utf-8").read()
reference = transformers_tokenizer_from_gguf(gemma3)[0] if transformers_tokenizer_from_gguf else None
for messages, got in zip(CHATS, cbatch_render(gemma3, CHATS, ["--chat-template", "gemma"])):
    try:
        want = jinja_render(template, messages, "<bos>", "<eos>")
    except jinja2.exceptions.TemplateError:
        c.check("error" in got, f"gemma3 GGUF: rejected chat {messages}: {got}")
        continue
    c.check(got.get("text") == want, f"gemma3 GGUF {messages}: {got.get('text')!r} != {want!r}")
    if reference is not None:
        want_ids = reference(want, add_special_tokens=False)["input_ids"]
        c.check(got.get("ids") == want_ids, f"gemma3 GGUF ids of {messages}: {got.get('ids')} != {want_ids}")
        c.check(got.get("ids", [0])[0] == 2 and got["ids"].count(2) == 1, f"gemma3: one BOS: {got.get('ids')}")

# --chat-template where the model has no template; no template and no flag is an error naming the flag.
plain = TINY_SPM_HF
got = cbatch_render(plain, CHATS[:1], ["--chat-template", "chatml"])
c.check(got and got[0].get("text") == "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n", f"forced chatml: {got}")
got = cbatch_render(plain, CHATS[:1])
c.check(got and "--chat-template" in got[0].get("error", ""), f"no template: {got}")
# Every name the help lists is one the option accepts and renders (the check and the help were two lists once).
help_text = run(["tokenize", "--help"]).stdout
listed = re.search(r"--chat-template TEXT:\{([^}]*)\}", help_text)
c.check(listed is not None, f"--chat-template's choices in the help: {help_text}")
names = listed.group(1).split(",") if listed else []
c.check({"smollm3", "gemma4", "harmony", "chatml"} <= set(names), f"--chat-template choices: {names}")
for name in names:
    got = cbatch_render(plain, CHATS[:1], ["--chat-template", name])
    c.check(len(got) == 1 and got[0].get("text") and "error" not in got[0], f"--chat-template {name}: {got}")
c.done()
