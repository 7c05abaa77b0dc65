"""Every pre-tokenizer family cbatch implements (GPT-2, StarCoder/SmolLM, Llama 3, Qwen2 and llama.cpp's
default) agrees with Hugging Face `tokenizers` running the family's regexes (Oniguruma), on 1,200+
strings: GPT-2's vocabulary is written into vocab-only GGUFs that differ only in tokenizer.ggml.pre,
and (except llama.cpp's default, which no tokenizer.json spells) into the tokenizer.json that
`tokenizers` itself saves, read by cbatch as a Hugging Face directory. An unknown tokenizer.ggml.pre is a
clear error that names the key and the value."""
import json
import os

from common import SHARED, Checks, need, need_modules, run, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import gguf_vocab, hf_tokenizer, write_vocab_gguf  # noqa: E402

source = os.path.join(SHARED, "tokenizers", "ggml-vocab-gpt-2.gguf")
need(source)
tokens, types, merges, _ = gguf_vocab(source)
strings = test_strings(num_random=1000, num_codepoint=200, seed=99)
stdin = "".join(json.dumps({"text": s}) + "\n" for s in strings)
work = tmpdir()
c = Checks()
for pre in ["gpt-2", "starcoder", "llama-bpe", "qwen2", "default"]:
    reference = hf_tokenizer(tokens, types, merges, pre)
    wants = [reference.encode(s, add_special_tokens=False).ids for s in strings]
    gguf_path = os.path.join(work, f"vocab-{pre}.gguf")
    write_vocab_gguf(gguf_path, tokens, types, merges, pre)
    hf_dir = os.path.join(work, f"hf-{pre}")
    os.makedirs(hf_dir)
    reference.save(os.path.join(hf_dir, "tokenizer.json"))
    for kind, path in [("gguf", gguf_path), ("tokenizer.json", hf_dir)][:1 if pre == "default" else 2]:
        proc = run(["tokenize", "--model", path, "--no-special"], stdin=stdin)
        got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
        c.check(len(got) == len(strings), f"{pre} {kind}: {len(got)} lines for {len(strings)} strings")
        agree = 0
        for s, ids, want in zip(strings, got, wants):
            agree += ids == want
            c.check(ids == want, f"{pre} {kind}: {s!r}: cbatch {ids} != HF {want}")
        print(f"pre {pre} from {kind}: {agree}/{len(strings)} strings agree with Hugging Face tokenizers")

bad = os.path.join(work, "vocab-unknown.gguf")
write_vocab_gguf(bad, tokens, types, merges, "my-own-pre")
proc = run(["tokenize", "--model", bad], stdin='{"text": "x"}\n', check=False)
c.check(proc.returncode == 1, f"unknown pre: exit {proc.returncode}")
c.check("tokenizer.ggml.pre" in proc.stderr and "my-own-pre" in proc.stderr, f"unknown pre message: {proc.stderr}")
c.done()
