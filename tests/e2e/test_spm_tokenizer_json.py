"""SentencePiece-style tokenizer.json (BPE over merge ranks with byte fallback, as Llama 2's
LlamaTokenizerFast), written from a `llama` GGUF vocabulary with merges derived from its scores as
transformers does (hf_reference.spm_tokenizer_json_from_gguf): tiny-spm's GGUF (512 pieces). Hugging Face
`tokenizers` with that file reproduces tiny-spm's own hf/tokenizer.json (trained merges) and its
golden/tokenize.jsonl, and cbatch reading it as a Hugging Face directory agrees with `tokenizers` on 1,200+
strings, with and without BOS, and with special-token text. With the optional shared data, Llama 2's
vocabulary (tokenizers/ggml-vocab-llama-spm.gguf) and its llama.cpp suite are extra cases."""
import json
import os

from common import Checks, need_modules, need_tiny_spm, read_jsonl, run, shared_extra, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import spm_tokenizer_json_from_gguf  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

SEPARATOR = "\n__ggml_vocab_test__\n"
c = Checks()
work = tmpdir()
strings = test_strings(num_random=1000, num_codepoint=200, seed=7) + ["Hello</s>world<s>", "<unk>"]


def check_vocab(label, vocab, published, suite):
    """`published`: an independent tokenizer that the derived one must equal; `suite`: (texts, ids) that the
    derived one must reproduce, ids with BOS or not as `suite_bos` says."""
    reference = spm_tokenizer_json_from_gguf(vocab)
    model = os.path.join(work, label)
    os.makedirs(model)
    reference.save(os.path.join(model, "tokenizer.json"))
    with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}, f)
    texts, suite_ids, suite_bos = suite
    for text, ids in zip(texts, suite_ids):
        c.check(reference.encode(text, add_special_tokens=suite_bos).ids == ids, f"{label}: HF itself misses suite case {text!r}")
    for special in [False, True]:
        inputs = texts + strings
        stdin = "".join(json.dumps({"text": s}) + "\n" for s in inputs)
        proc = run(["tokenize", "--model", model] + ([] if special else ["--no-special"]), stdin=stdin)
        got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
        c.check(len(got) == len(inputs), f"{label}: {len(got)} result lines for {len(inputs)} strings")
        agree = 0
        for s, ids in zip(inputs, got):
            want = reference.encode(s, add_special_tokens=special).ids
            if published:
                c.check(published.encode(s, add_special_tokens=special).ids == want,
                        f"{label}: the derived tokenizer.json differs from the published one on {s!r}")
            agree += ids == want
            c.check(ids == want, f"{label} special={special} {s!r}: cbatch {ids} != HF {want}")
        print(f"{label}, add_special={special}: {agree}/{len(inputs)} strings agree (incl. the {len(texts)} suite cases)")


tiny_spm = need_tiny_spm()
golden = read_jsonl(os.path.join(tiny_spm, "golden", "tokenize.jsonl"))
c.check(len(golden) > 40, f"{len(golden)} cases in tiny-spm's golden/tokenize.jsonl")
check_vocab("tiny-spm", os.path.join(tiny_spm, "tiny-spm.gguf"),
            Tokenizer.from_file(os.path.join(tiny_spm, "hf", "tokenizer.json")),
            ([g["text"] for g in golden], [g["ids"] for g in golden], True))
llama = shared_extra(os.path.join("tokenizers", "ggml-vocab-llama-spm.gguf"))
if llama:
    texts = open(llama + ".inp", encoding="utf-8", newline="").read().split(SEPARATOR)[:-1]
    ids = [[int(x) for x in line.split()] for line in open(llama + ".out").read().split("\n")[:-1]]
    check_vocab("llama-spm", llama, None, (texts, ids, False))
c.done()
