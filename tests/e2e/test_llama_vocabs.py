"""Real tokenizers: llama.cpp's vocabulary test files (fetched from the llama-cpp-python sdist by
tools/fetch_llama_vocabs.sh: a vocab-only GGUF of each tokenizer, its test strings, and the ids Hugging Face's
tokenizer gives them, as llama.cpp's convert_hf_to_gguf_update.py wrote them). cbatch tokenize --no-special on
the GGUF must give those ids for every string: Gemma 4's 262k SentencePiece-style BPE (tokenizer.ggml.model
gemma4), Qwen3.5's 248k byte-level BPE with its pre-tokenizer regex, Llama 2's and Phi-3's SentencePiece, Llama
3's, Qwen2's, GPT-2's, StarCoder's, Refact's, MPT's and Command-R's byte-level BPE. The vocabularies cbatch does
not read (BERT's WordPiece GGUF, the DeepSeek and Falcon pre-tokenizers) exit 1 naming the key."""
import json
import os

from common import Checks, need_llama_vocabs, run

READ = ["gemma-4", "qwen35", "llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "starcoder", "refact", "mpt",
        "command-r"]
REFUSED = {"bert-bge": "tokenizer.ggml.model 'bert'", "deepseek-llm": "tokenizer.ggml.pre 'deepseek-llm'",
           "falcon": "tokenizer.ggml.pre 'falcon'"}
MARKER = "\n__ggml_vocab_test__\n"


def cases(path):
    """The test strings and their ids: .inp holds each string followed by the marker, .out a line of ids each."""
    with open(path + ".inp", encoding="utf-8") as f:
        strings = f.read().split(MARKER)
    if strings and strings[-1] == "":
        strings.pop()
    with open(path + ".out", encoding="utf-8") as f:
        ids = [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(strings)]]
    return strings, ids


c = Checks()
vocabs = need_llama_vocabs()
for name in READ:
    path = os.path.join(vocabs, f"ggml-vocab-{name}.gguf")
    strings, want = cases(path)
    c.check(len(strings) >= 40 and len(want) == len(strings), f"{name}: {len(strings)} strings, {len(want)} id lines")
    stdin = "".join(json.dumps({"text": s}) + "\n" for s in strings)
    got = [json.loads(line).get("ids") for line in run(["tokenize", "--model", path, "--no-special"],
                                                        stdin=stdin).stdout.splitlines()]
    c.check(len(got) == len(strings), f"{name}: {len(got)} result lines for {len(strings)} strings")
    for s, ids, expected in zip(strings, got, want):
        c.check(ids == expected, f"{name} {s!r}: cbatch {ids} != Hugging Face {expected}")
    print(f"{name}: {sum(g == w for g, w in zip(got, want))} of {len(strings)} strings agree")
for name, needle in REFUSED.items():
    proc = run(["tokenize", "--model", os.path.join(vocabs, f"ggml-vocab-{name}.gguf")], stdin='{"text": "hi"}\n',
               check=False)
    c.check(proc.returncode == 1 and needle in proc.stderr, f"{name}: exit {proc.returncode}, {proc.stderr[-300:]}")
c.done()
