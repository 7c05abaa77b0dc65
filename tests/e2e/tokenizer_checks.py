"""What the tokenizer tests share: `cbatch tokenize` against a Hugging Face `tokenizers` reference, string by
string, and a copy of a tokenizer.json with one edit (a variant of a real tokenizer)."""
import json
import os

from common import run


def check_tokenize(c, label, model, strings, reference, specials=(True, False)):
    """cbatch tokenize --model `model` gives reference(s, add_special) for every string s, with and without
    the special tokens (each of `specials`); prints how many agree."""
    for special in specials:
        stdin = "".join(json.dumps({"text": s}) + "\n" for s in strings)
        proc = run(["tokenize", "--model", model] + ([] if special else ["--no-special"]), stdin=stdin)
        got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
        c.check(len(got) == len(strings), f"{label}: {len(got)} result lines for {len(strings)} strings")
        agree = 0
        for s, ids in zip(strings, got):
            want = reference(s, special)
            agree += ids == want
            c.check(ids == want, f"{label} special={special} {s!r}: cbatch {ids} != tokenizers {want}")
        print(f"{label}, add_special={special}: {agree}/{len(strings)} strings agree")


def ids_of(tokenizer):
    """A tokenizers.Tokenizer as a reference of check_tokenize."""
    return lambda s, special: tokenizer.encode(s, add_special_tokens=special).ids


def file_reference(model_dir):
    """The reference of model_dir/tokenizer.json: the tokenizers package, without truncation or padding."""
    from tokenizers import Tokenizer
    reference = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    return ids_of(reference)


def tokenizer_variant(work, source, name, edit):
    """A copy of source's tokenizer.json with edit(json) applied, in its own directory under work."""
    with open(os.path.join(source, "tokenizer.json")) as f:
        data = json.load(f)
    edit(data)
    out = os.path.join(work, name)
    os.makedirs(out)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(data, f)
    return out
