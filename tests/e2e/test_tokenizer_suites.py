"""`cbatch tokenize --model MODEL --no-special` reproduces llama.cpp-style vocab test suites: a .inp file of
cases separated by "\\n__ggml_vocab_test__\\n" and a .out file of Hugging Face ids, one line per case. The
suites are written here for SmolLM2 (its GGUF, ids from `tokenizers` built from the GGUF's vocabulary,
merges and pre-tokenizer) and tiny-spm (its GGUF, ids from `tokenizers` on its hf/tokenizer.json), over
llama.cpp's suite inputs (written out below) and the shared test strings; with the optional shared data,
llama.cpp's own suites there (tokenizers/*.gguf with .inp/.out) are extra cases."""
import glob
import json
import os

from common import Checks, need_modules, need_smollm2, need_tiny_spm, run, shared_extra, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import hf_tokenizer_from_gguf  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

SEPARATOR = "\n__ggml_vocab_test__\n"
# The inputs of llama.cpp's tests/test-tokenizer-0 suites (convert_hf_to_gguf_update.py).
LLAMA_CPP_INPUTS = [
    "ied 4 ½ months", "Führer", "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", "Hello world",
    " Hello world", "Hello World", " Hello World", " Hello World!", "Hello, world!", " Hello, world!",
    " this is 🦙.cpp", "w048 7tuijk dsdfhu",
    "нещо на Български", "កាន់តែពិសេសអាចខលចេញ", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "Hello", " Hello", "  Hello", "   Hello", "    Hello", "    Hello\n    Hello", " (", "\n =", "' era",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "!!!!!!", "3", "33", "333", "3333", "33333",
    "333333", "3333333", "33333333", "333333333", "Cửa Việt", " discards",
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 "
    "3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на "
    "Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make "
    "it, 'D you like some tea? We'Ve a'lL",
]


def read_cases(path):
    text = open(path, encoding="utf-8", newline="").read()
    return text.split(SEPARATOR)[:-1]  # the text after the last separator is not a case


def read_ids(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [[int(x) for x in line.split()] for line in f.read().split("\n")[:-1]]


def write_suite(prefix, cases, reference):
    """PREFIX.inp and PREFIX.out in llama.cpp's format, the ids from `reference` (no special tokens)."""
    with open(prefix + ".inp", "w", encoding="utf-8", newline="") as f:
        f.write("".join(case + SEPARATOR for case in cases))
    with open(prefix + ".out", "w", encoding="utf-8", newline="") as f:
        f.write("".join(" ".join(map(str, reference.encode(case, add_special_tokens=False).ids)) + "\n"
                        for case in cases))
    return prefix


def check_suite(c, model, prefix):
    label = os.path.basename(prefix)
    cases, expected = read_cases(prefix + ".inp"), read_ids(prefix + ".out")
    c.check(len(cases) == len(expected) and len(cases) > 40, f"{label}: {len(cases)} cases, {len(expected)} id lines")
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in cases)
    got = [json.loads(line)["ids"] for line in run(["tokenize", "--model", model, "--no-special"], stdin=stdin).stdout.splitlines()]
    c.check(len(got) == len(cases), f"{label}: {len(got)} result lines for {len(cases)} cases")
    for text, g, e in zip(cases, got, expected):
        c.check(g == e, f"{label}: {text!r}: {g} != {e}")
    print(f"{label}: {sum(g == e for g, e in zip(got, expected))}/{len(cases)} cases")


c = Checks()
work = tmpdir()
cases = LLAMA_CPP_INPUTS + test_strings(num_random=300, num_codepoint=100, seed=3)
smollm2 = need_smollm2()
check_suite(c, smollm2, write_suite(os.path.join(work, "smollm2"), cases, hf_tokenizer_from_gguf(smollm2)))
tiny_spm = need_tiny_spm()
check_suite(c, os.path.join(tiny_spm, "tiny-spm.gguf"),
            write_suite(os.path.join(work, "tiny-spm"), cases, Tokenizer.from_file(os.path.join(tiny_spm, "hf", "tokenizer.json"))))
suite_dir = shared_extra("tokenizers")
if suite_dir:
    vocabs = sorted(glob.glob(os.path.join(suite_dir, "*.gguf")))
    c.check(len(vocabs) >= 2, f"{len(vocabs)} vocab files in {suite_dir}")
    for vocab in vocabs:
        check_suite(c, vocab, vocab)
c.done()
