"""GBNF grammars and json_object at any depth on SmolLM2 (CPU): every completion that finishes with
`stop` is checked by a parser written here for its grammar (recursive descent, or Python's json for the
JSON grammar), greedy and at temperature 1.0; json_object outputs nested past 3 levels parse; bad
grammars (syntax error with its position, undefined rule, left recursion, a grammar that accepts
nothing) are error lines and the rest runs (exit 2); n > 1 samples each parse; greedy outputs are the
same across modes and budgets."""
import json
import os
import re

from common import Checks, need_smollm2, read_jsonl, run, tmpdir, write_jsonl

JSON_GBNF = r'''# JSON with at most one space between tokens
root ::= " "? value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{1,10}) ("." [0-9]{1,6})?
ws ::= " "?
'''
ARITH_GBNF = r'''root ::= " "? expr
expr ::= term (" "? [-+] " "? term)*
term ::= factor (" "? [*/] " "? factor)*
factor ::= [0-9]{1,4} | "(" expr ")"
'''
LIST_GBNF = '''root ::= " "? list
list ::= "[" (item (", " item)*)? "]"
item ::= [a-z]+ | list
'''
ANSWER_GBNF = '''root ::= " " answer "."
answer ::= "yes" | "no" | "maybe (" answer ")"
'''
WORDS_GBNF = '''root ::= " " word (" " word){0,5} "."
word ::= [A-Za-zÀ-ÿ]+ | "(" word (" " word)* ")"
'''


class Text:
    """A cursor over a completion for the recursive-descent checkers."""

    def __init__(self, s):
        self.s, self.i = s, 0

    def eat(self, token):
        if self.s.startswith(token, self.i):
            self.i += len(token)
            return True
        return False

    def span(self, pattern):
        m = re.compile(pattern).match(self.s, self.i)
        if not m or not m.group(0):
            return False
        self.i = m.end()
        return True


def parses(rule, text):
    t = Text(text)
    try:
        return rule(t) and t.i == len(t.s)
    except RecursionError:
        return False


def arith(t):
    t.eat(" ")
    def factor():
        return t.span(r"[0-9]{1,4}") or (t.eat("(") and expr() and t.eat(")"))
    def chain(item, ops):
        if not item():
            return False
        while True:
            save = t.i
            t.eat(" ")
            if not t.span(ops):
                t.i = save
                return True
            t.eat(" ")
            if not item():
                return False
    def term():
        return chain(factor, r"[*/]")
    def expr():
        return chain(term, r"[-+]")
    return expr()


def word_list(t):
    t.eat(" ")
    def lst():
        if not t.eat("["):
            return False
        if t.eat("]"):
            return True
        while True:
            if not (t.span(r"[a-z]+") or lst()):
                return False
            if t.eat("]"):
                return True
            if not t.eat(", "):
                return False
    return lst()


def answer(t):
    def ans():
        return t.eat("yes") or t.eat("no") or (t.eat("maybe (") and ans() and t.eat(")"))
    return t.eat(" ") and ans() and t.eat(".")


def words(t):
    def word():
        if t.span(r"[A-Za-zÀ-ÿ]+"):
            return True
        if not (t.eat("(") and word()):
            return False
        while t.eat(" "):
            if not word():
                return False
        return t.eat(")")
    if not (t.eat(" ") and word()):
        return False
    for _ in range(5):
        save = t.i
        if not (t.eat(" ") and word()):
            t.i = save
            break
    return t.eat(".")


def json_value(t):
    try:
        json.loads(t.s)
    except ValueError:
        return False
    t.i = len(t.s)
    return True


def depth(v):
    if isinstance(v, dict):
        return 1 + max([depth(x) for x in v.values()] or [0])
    if isinstance(v, list):
        return 1 + max([depth(x) for x in v] or [0])
    return 0


GRAMMARS = [(JSON_GBNF, json_value, "Some JSON:"), (ARITH_GBNF, arith, "2*(3+4) ="), (LIST_GBNF, word_list, "A nested list:"),
            (ANSWER_GBNF, answer, "Is it raining?"), (WORDS_GBNF, words, "A sentence:")]
DEEP_PROMPTS = ['Deeply nested JSON: {"a": {"b": {"c": {"d": {"e": 1}}}}}\nAnother deeply nested JSON:',
                'A JSON tree: {"root": {"left": {"left": {"left": {"value": 1}}}}}\nA bigger tree:']
if os.environ.get("CBATCH_SANITIZED") == "1":  # the sanitizer build checks a few (10x slower)
    GRAMMARS, DEEP_PROMPTS = [GRAMMARS[0], GRAMMARS[3]], DEEP_PROMPTS[:1]  # the JSON one and one that ends early
model = need_smollm2()
c = Checks()
work = tmpdir()
rows = []
# Each grammar greedy and in two samples at temperature 1.0: whether an output ends within max_tokens is the
# model's choice, which any change of rounding can move, so the parse checks get 15 chances.
SAMPLES = [(0, 0), (1.0, 0), (1.0, 50)]  # (temperature, seed offset)
for i, (gbnf, _, prompt) in enumerate(GRAMMARS):
    for temp, seed in SAMPLES:
        rows.append({"id": f"g{i}-{temp}-{seed}", "prompt": prompt, "max_tokens": 48, "temperature": temp,
                     "seed": i + seed, "structured_outputs": {"grammar": gbnf}})
for i, prompt in enumerate(DEEP_PROMPTS):
    for temp in (0, 1.0):
        rows.append({"id": f"obj{i}-{temp}", "prompt": prompt, "max_tokens": 60, "temperature": temp, "seed": i,
                     "response_format": {"type": "json_object"}})
rows.append({"id": "n3", "prompt": "3*(1+2) =", "max_tokens": 24, "temperature": 1.0, "seed": 9, "n": 3,
             "structured_outputs": {"grammar": ARITH_GBNF}})
rows.append({"id": "old-name", "prompt": "Is it?", "max_tokens": 12, "temperature": 0, "guided_grammar": ANSWER_GBNF})
bad = {"bad-syntax": ('root ::= "a" )', "line 1 column 14"), "bad-undefined": ("root ::= x", "undefined rule 'x'"),
       "bad-left": ('root ::= root "a" | "b"', "left recursion through rule 'root'"),
       "bad-empty": ('root ::= "a" root', "matches no string"), "bad-no-root": ('x ::= "a"', "no 'root' rule"),
       "bad-type": (5, "structured_outputs.grammar")}
for name, (grammar, _) in bad.items():
    rows.append({"id": name, "prompt": "x", "max_tokens": 4, "structured_outputs": {"grammar": grammar}})
prompts, out = os.path.join(work, "p.jsonl"), os.path.join(work, "o.jsonl")
write_jsonl(prompts, rows)
run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"], expect_rc=2)
results = {r["id"]: r for r in read_jsonl(out)}

stopped = 0
for i, (_, check, _) in enumerate(GRAMMARS):
    for temp, seed in SAMPLES:
        r = results[f"g{i}-{temp}-{seed}"]
        if r["finish_reason"] == "stop":
            stopped += 1
            c.check(parses(check, r["text"]), f"grammar {i} (t={temp}, seed +{seed}): {r['text']!r} does not parse")
        print(f"grammar {i} (t={temp}, seed +{seed}): {r['finish_reason']} {r['text']!r}")
c.check(stopped >= len(GRAMMARS), f"only {stopped} of {len(SAMPLES) * len(GRAMMARS)} grammar outputs completed")
deepest = 0
for i in range(len(DEEP_PROMPTS)):
    for temp in (0, 1.0):
        r = results[f"obj{i}-{temp}"]
        if r["finish_reason"] == "stop":
            doc = json.loads(r["text"])
            c.check(isinstance(doc, dict), f"json_object: {r['text']!r}")
            deepest = max(deepest, depth(doc))
c.check(deepest > 3, f"no json_object output nested past 3 levels (deepest {deepest})")
for o in results["n3"]["outputs"]:
    c.check(o["finish_reason"] == "length" or parses(arith, o["text"]), f"n=3: {o['text']!r} does not parse")
c.check(parses(answer, results["old-name"]["text"]), f"guided_grammar: {results['old-name']['text']!r}")
for name, (_, words_) in bad.items():
    c.check(words_ in results[name].get("error", {}).get("message", ""), f"{name}: {results[name]}")

# Greedy output under a grammar does not depend on the schedule.
write_jsonl(prompts, [r for r in rows if r.get("temperature") == 0])
reference = None
schedules = ([], ["--mode", "sequential"], ["--max-num-batched-tokens", "16", "--block-size", "4"])
for extra in schedules if os.environ.get("CBATCH_SANITIZED") != "1" else ():  # test_structured covers it there
    run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + extra)
    got = {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}
    reference = reference or got
    c.check(got == reference, f"greedy outputs under grammars change with {' '.join(extra)}")
c.done()
