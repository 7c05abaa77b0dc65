"""XLM-RoBERTa end to end on a tiny seeded model this test writes (xlmr_files.py: a Unigram tokenizer.json
trained by the `tokenizers` package with a Precompiled normalizer, config.json, model.safetensors).

- Tokens: cbatch's ids equal the `tokenizers` package's on 3,100 strings (accents, CJK, emoji, whitespace
  runs, controls, special-token text, empty; mapped characters followed by marks, joiners and format
  characters, where grapheme clusters end), with and without <s> ... </s>, for the XLM-R pipeline and for
  variants of its options (prepend_scheme first after WhitespaceSplit, Metaspace without split, byte
  fallback, no normalizer).
- Embeddings: mean pooling (the model's sentence-transformers files) and --pooling cls equal the float64
  reference (bert_reference.py: positions from pad_token_id + 1, pad tokens skipped) at cosine >= 0.9999,
  including text holding "<pad>" (pad-aware positions) and one input truncated to the 48-position context.
- Cross-encoder: XLMRobertaForSequenceClassification (roberta. prefix, classifier.dense -> tanh ->
  classifier.out_proj on <s>) scores pairs "<s> a </s></s> b </s>" as the reference does, and reranks.
- Bad files: an unsupported normalizer, a charsmap that is not base64, a missing tensor: clear errors
  naming the thing."""
import json
import math
import os
import random
import shutil
import sys

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "tokenizers")
import numpy as np  # noqa: E402
from tokenizers import Tokenizer, normalizers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xlmr_files  # noqa: E402
from bert_reference import BertReference  # noqa: E402
from tokenizer_checks import check_tokenize, ids_of, tokenizer_variant  # noqa: E402
from tokenizer_strings import test_strings  # noqa: E402

c = Checks()
work = tmpdir()
bi_dir, ce_dir = os.path.join(work, "tiny-xlmr"), os.path.join(work, "tiny-xlmr-reranker")
xlmr_files.write_model(bi_dir)
xlmr_files.write_model(ce_dir, classifier=True)
CPU = ["--device", "cpu", "--quiet"]

# The charsmap is read by `tokenizers` as built: whole clusters under 6 bytes map by their first key.
charsmap = normalizers.Precompiled(xlmr_files.darts_charsmap(xlmr_files.charsmap_rules()))
for text, want in [("\ufb01 \uff21\uff42", "fi Ab"), ("e\u0301!", "\u00e9!"), ("cr\r\nlf", "cr lf"),
                   ("\uff21\u0301", "A"), ("zero\u200bwidth", "zerowidth")]:
    got = charsmap.normalize_str(text)
    c.check(got == want, f"the test charsmap maps {text!r} to {got!r}, meant {want!r}")

XLMR_CURATED = ["Ａ\u0301 fullwidth with a mark", "crlf\r\n", "e\u0301", "a  b   c", "  lead", "trail  ",
                "x <mask> y", "<pad>cat", "cats<pad> <pad>dogs", "", " ", "\u200b", "①②③ ™ …", "ﬁﬂ",
                "Москва 東京 서울 🙂👨‍👩‍👧", "\t\ttabs\nand\nnewlines", "\u200b\u0308", "\ufeff\u0327x", "\u0600a\u0301"]


def cluster_strings(count=1500, seed=7):
    """Bases the charsmap maps (or not) followed by marks, joiners and controls: where grapheme clusters end."""
    rng = random.Random(seed)
    marks = ["\u0301", "\u0308", "\u20dd", "\u200d", "\u200c", "\ufe0f", "\U0001F3FB", "\u3099", "\u0903", "\u200b"]
    bases = ["a", "e", "\uff21", "\uff76", "\u2460", "\ufb01", "\u2122", "\u1100", "\u1161", "\uac00", "\U0001F600",
             "\U0001F468", "\U0001F1EB", "\r", "\n", "\t", "\u0915", "\u00a0", " ", "x", "\u200b", "\ufeff", "\u0600",
             "\u00ad", "\u2028"]
    return ["".join(rng.choice(bases) + "".join(rng.choice(marks) for _ in range(rng.randint(0, 2)))
                    for _ in range(rng.randint(1, 8))) for _ in range(count)]


def check_tokens(label, model_dir, strings):
    check_tokenize(c, label, model_dir, strings, ids_of(Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))))


def variant(name, edit):
    return tokenizer_variant(work, bi_dir, name, edit)


def first_after_whitespace_split(data):
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, dict(data["pre_tokenizer"], prepend_scheme="first")]}


def byte_fallback(data):
    vocab = data["model"]["vocab"]
    vocab += [[f"<0x{b:02X}>", -20.0] for b in range(256)]
    data["model"]["byte_fallback"] = True
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<mask>"]


check_tokens("XLM-R pipeline", bi_dir, XLMR_CURATED + test_strings() + cluster_strings())
few = XLMR_CURATED + test_strings(num_random=200, num_codepoint=100, seed=25)
check_tokens("WhitespaceSplit + prepend_scheme first", variant("ws-first", first_after_whitespace_split), few)
check_tokens("Metaspace split false", variant("no-split", lambda d: d["pre_tokenizer"].update(split=False)), few)
check_tokens("byte fallback", variant("bytes", byte_fallback), few)
check_tokens("no normalizer", variant("raw", lambda d: d.update(normalizer=None)), few)


def cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def cbatch_rows(model_dir, lines, *extra, expect_rc=0):
    path, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
    write_jsonl(path, lines)
    run(["run", path, "--model", model_dir, "-o", out, "--ordered"] + CPU + list(extra), expect_rc=expect_rc)
    return {r.get("custom_id", r.get("id")): r for r in read_jsonl(out)}


SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Le chat dort dans la boîte.", "東京は日本の首都です。",
             "Emoji 🙂 and ｆｕｌｌｗｉｄｔｈ text", "cats <pad> dogs <pad><pad> birds", "x",
             " ".join(["Paris is the capital of France."] * 6)]  # past the 48 positions: truncated
reference = BertReference(bi_dir)
tok = Tokenizer.from_file(os.path.join(bi_dir, "tokenizer.json"))
c.check(reference.position_ids([0, 5, 1, 6, 2]).tolist() == [2, 3, 1, 4, 5], "the reference's XLM-R positions")


def expected_ids(text):
    ids = tok.encode(text).ids
    limit = xlmr_files.CONTEXT
    return (ids if len(ids) <= limit else ids[:limit - 1] + [ids[-1]]), max(0, len(ids) - limit)


def check_embeddings(label, pooling, *extra):
    rows = cbatch_rows(bi_dir, [{"id": f"s{i}", "input": s} for i, s in enumerate(SENTENCES)], *extra)
    for i, s in enumerate(SENTENCES):
        r, (ids, dropped) = rows.get(f"s{i}"), expected_ids(s)
        c.check(r is not None and "embedding" in r, f"{label} s{i}: no embedding ({r})")
        if r is None or "embedding" not in r:
            continue
        cos = cosine(r["embedding"], reference.embed(ids, pooling=pooling))
        c.check(cos >= 0.9999, f"{label} s{i} {s[:30]!r}: cosine {cos:.7f} with the float64 reference")
        c.check(r["prompt_tokens"] == len(ids) and r["truncated_tokens"] == dropped,
                f"{label} s{i}: tokens {r['prompt_tokens']} / dropped {r['truncated_tokens']}, want {len(ids)} / {dropped}")
    c.check(1 in expected_ids(SENTENCES[4])[0], "the <pad> sentence holds pad tokens")
    c.check(expected_ids(SENTENCES[-1])[1] > 0, "the long sentence is truncated")
    print(f"{label}: {len(SENTENCES)} embeddings checked against the float64 reference")


check_embeddings("mean pooling", "mean")
check_embeddings("--pooling cls", "cls", "--pooling", "cls")

# The cross-encoder: scores and a rerank against the reference's classification head.
ce_reference = BertReference(ce_dir)
ce_tok = Tokenizer.from_file(os.path.join(ce_dir, "tokenizer.json"))  # training may order pieces differently
query = "Where do cats sleep?"
docs = ["Cats sleep in boxes.", "The stock market fell.", "Paris is the capital of France.", "Le chat dort."]


def expected_score(q, d):
    enc = ce_tok.encode(q, d)
    c.check(set(enc.type_ids) == {0}, "XLM-R pairs are all token type 0")
    logit = float(ce_reference.classify(enc.ids, enc.type_ids)[0])
    return 1.0 / (1.0 + math.exp(-logit)), len(enc.ids)


line = lambda cid, url, body: {"custom_id": cid, "method": "POST", "url": url, "body": dict({"model": "x"}, **body)}
rows = cbatch_rows(ce_dir, [line("score", "/v1/score", {"text_1": query, "text_2": docs}),
                            line("rerank", "/v1/rerank", {"query": query, "documents": docs, "top_n": 2})])
want = [expected_score(query, d) for d in docs]
body = rows["score"]["response"]["body"] if rows["score"]["error"] is None else None
c.check(body is not None, f"score: {rows['score']['error']}")
if body is not None:
    for (score, _), d in zip(want, body["data"]):
        c.check(abs(d["score"] - score) < 1e-4, f"score {d['score']} != reference {score:.6f}")
    c.check(body["usage"]["prompt_tokens"] == sum(n for _, n in want), f"score usage {body['usage']}")
order = sorted(range(len(docs)), key=lambda i: -want[i][0])
c.check(len({round(s, 3) for s, _ in want}) == len(docs), f"the scores are too close to rank: {want}")
if rows["rerank"]["error"] is None:
    got_order = [x["index"] for x in rows["rerank"]["response"]["body"]["results"]]
    c.check(got_order == order[:2], f"rerank order {got_order} != {order[:2]}")
else:
    c.check(False, f"rerank: {rows['rerank']['error']}")
print(f"cross-encoder: {len(docs)} scores and a rerank checked against the float64 reference")


# Bad files: each error names the file's field or the tensor.
messages = []


def load_error(model_dir, args):
    proc = run(args + ["--model", model_dir], stdin='{"text": "x"}\n', check=False)
    c.check(proc.returncode != 0, f"{model_dir}: exit status 0 for a bad model")
    messages.append(proc.stderr)
    return proc.stderr


message = load_error(variant("nfkc", lambda d: d.update(normalizer={"type": "NFKC"})), ["tokenize"])
c.check("normalizer" in message and "NFKC" in message and "tokenizer.json" in message, f"NFKC normalizer: {message}")
bad_map = lambda d: d["normalizer"]["normalizers"][0].update(precompiled_charsmap="not base64!")
message = load_error(variant("bad-charsmap", bad_map), ["tokenize"])
c.check("precompiled_charsmap" in message and "base64" in message, f"bad charsmap: {message}")
missing = os.path.join(work, "missing-tensor")
shutil.copytree(bi_dir, missing)
w = xlmr_files.weights(json.load(open(os.path.join(bi_dir, "config.json")))["vocab_size"])
del w["encoder.layer.1.output.dense.bias"]
xlmr_files.tiny_models.write_safetensors(os.path.join(missing, "model.safetensors"), w)
message = load_error(missing, ["inspect"])
c.check("encoder.layer.1.output.dense.bias" in message and "missing" in message, f"missing tensor: {message}")
print("bad files: clear errors")
for m in messages:
    print("  " + m.strip().splitlines()[-1])

shutil.rmtree(work, ignore_errors=True)
c.done()
