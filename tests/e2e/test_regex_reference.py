"""cbatch's regex compiler against Python's `re`, differentially (no model): seeded random patterns from
a grammar of the documented subset (literals, multibyte UTF-8 characters, escapes, classes, '.', groups,
alternation, * + ? {m} {m,} {m,n} {,n} {,} and their lazy forms, ^ and $ at the ends), hostile ones (huge
counts, unbalanced braces, '{' in odd places, repeated and possessive quantifiers) and random
mutations of both, each with random strings and strings drawn to match it. Every pattern goes through
the engine's own compile path for `structured_outputs.regex` (the regex_match test tool: the NFA, then
the whole byte DFA). Asserts: (a) a pattern Python refuses (re.error, OverflowError) cbatch refuses;
(b) where cbatch accepts, each full match equals re.fullmatch under re.ASCII (cbatch's \\d \\w \\s are
ASCII; '.' does not match a newline in both); (c) where cbatch refuses what Python accepts, the message
names a documented kind (a limit, or a construct that is not supported). Runs in a few seconds."""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import warnings

from common import Checks

TOOL = os.environ.get("CBATCH_REGEX_MATCH")
if not TOOL or not os.path.exists(TOOL):
    print("SKIPPED: the regex_match test tool is not built (run through ctest)")
    sys.exit(77)

warnings.simplefilter("ignore")  # Python's FutureWarning for '[[' or '--' in a class
rng = random.Random(20261201)

# The phrases of cbatch's refusals that Python cannot share: limits and unsupported constructs.
DOCUMENTED = ("not supported", "is only supported at", "a repetition count above 1000", "over 200000 states",
              "grows past 50000 states", "nested over 200 deep")
LITERALS = list("abcxyz09 ,-{}]#/=_é猫") + ["😀", "\n"]
ESCAPES = [r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", r"\n", r"\t", r"\r", r"\f", r"\v", r"\.", r"\\", r"\*",
           r"\+", r"\?", r"\(", r"\)", r"\[", r"\]", r"\{", r"\}", r"\|", r"\^", r"\$", r"\-", r"\ ", r"\,",
           r"\x41", r"\x7b", r"\x0a", r"\u00e9", r"\u732b", r"\u0041", "\\é", "\\猫"]
CLASS_ITEMS = ["a", "b", "x", "a-c", "0-9", "x-z", r"\d", r"\s", r"\w", r"\W", r"\S", r"\n", r"\]", r"\\", r"\-",
               "_", ".", "*", "{", "}", "(", "[", "|", "$", "^", " ", r"\x41-\x43"]
# Characters the strings are drawn from, beside each pattern's own.
POOL = list("abcxyzABC09_ -,.{}[]()*+?|^$\\\t\n\r\x0b\x0c") + ["é", "猫", "😀", "\u00a0", "\u2028", "ß"]


# A pattern is built as a tree: (text, sample) where sample(rng) draws a string the node matches.
def lit(text, value):
    return text, lambda r: value


def char_set(text):
    """An escape, class or '.' as its pattern text; it samples from POOL what Python says it matches."""
    try:
        members = [c for c in POOL if re.fullmatch(text, c, re.ASCII)]
    except re.error:
        members = []
    return text, lambda r: r.choice(members) if members else ""


def atom(depth):
    kind = rng.random()
    if kind < 0.35:
        c = rng.choice(LITERALS)
        return lit(c, c)
    if kind < 0.5:
        e = rng.choice(ESCAPES)
        value = re.fullmatch(r"\\(.)", e, re.S)
        return (lit(e, value.group(1)) if value and not value.group(1).isalnum() else char_set(e))
    if kind < 0.68:
        items = [rng.choice(CLASS_ITEMS) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            items.insert(0, rng.choice(["]", "-"]))
        if rng.random() < 0.1:
            items.append("-")
        return char_set("[" + ("^" if rng.random() < 0.25 else "") + "".join(items) + "]")
    if kind < 0.76:
        return char_set(".")
    if depth > 0:
        inner_text, inner_sample = alternation(depth - 1)
        return rng.choice(["(", "(?:"]) + inner_text + ")", inner_sample
    c = rng.choice(LITERALS)
    return lit(c, c)


def quantifier():
    m, n = rng.randint(0, 3), rng.randint(0, 4)
    lo, hi = min(m, n), max(m, n)
    text, bounds = rng.choice([("*", (0, None)), ("+", (1, None)), ("?", (0, 1)), (f"{{{m}}}", (m, m)),
                               (f"{{{m},}}", (m, None)), (f"{{{lo},{hi}}}", (lo, hi)), (f"{{,{n}}}", (0, n)),
                               ("{,}", (0, None))])
    return text + ("?" if rng.random() < 0.2 else ""), bounds


def item(depth):
    text, sample = atom(depth)
    if rng.random() < 0.35:
        q, (lo, hi) = quantifier()
        top = hi if hi is not None else lo + 3
        return text + q, lambda r, s=sample: "".join(s(r) for _ in range(r.randint(lo, top)))
    return text, sample


def sequence(depth):
    parts = [item(depth) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4]))]
    return "".join(t for t, _ in parts), lambda r: "".join(s(r) for _, s in parts)


def alternation(depth):
    options = [sequence(depth) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    return "|".join(t for t, _ in options), lambda r: r.choice(options)[1](r)


def random_pattern():
    text, sample = alternation(2)
    if rng.random() < 0.1:
        text = "^" + text
    if rng.random() < 0.1:
        text += "$"
    return text, sample


HOSTILE = ["a{1000000}", "a{1001}", "a{1000}", "a{100000}", "a{99999999999999999999}", "a{4294967295}",
           "a{4294967294}", "a{,1000000}", "a{1000000,}", "a{0,1001}", "a{2,1}", "a{", "a{1", "a{1,", "a{1,2",
           "a}", "{", "}", "{}", "a{}", "a{a}", "a{ 1}", "a{1 }", "a{1,2,3}", "a{-1}", "x{+1}", "a{{1}", "{1}",
           "{,}", "{,2}", "a|{1}", "({1})", "^{1}", "^*", "^{", "a{1}{2}", "a**", "a*??", "a*?+", "a*+", "a++",
           "a{2}+", "a{2}?", "a{,}?", "(a{2}){3}", "[{]", r"\{1}", "a{01}", "a{,0}", "a{0}", "a{0,0}", "(?:){3}",
           "(){,}", r"[\d-a]", r"[\d-]", r"[a-\d]", "[b-a]", "\\ud800", r"\x80", r"\b", r"\A", r"\1", "(?i)a",
           "(?=a)", "a$b", "a^", "((a{1000}){1000}){1000}", "(a|b)*a(a|b){20}", "(a|b)*a(a|b){10}", "[é]",
           "\\é{2}", "é{2}", "😀{,2}", ".{3}", "(?:a|)*", "(a*)*b", "()*", "a{3,}?", "[]", "[]a]", "[^]a]", "(^a)", "(a$)", "a|^b", "a$|b",
           r"\0", r"\a", r"\xg1", "a\\", "[😀]", "[[]", "a{1}?{2}", "(?P<n>a)", "(?#c)a", "a{1000}{2}"]
INSERTS = list("{}{},0123456789*+?|()[]^$\\") + ["{1000000}", "{,", "{2,1}", "{99999999999}", "{,3}", "{}", "{1}{2}"]


def mutated(text):
    for _ in range(rng.randint(1, 2)):
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(INSERTS) + text[at:]
    return text


def near_misses(s):
    out = []
    if s:
        at = rng.randrange(len(s))
        out.append(s[:at] + s[at + 1:])
    at = rng.randint(0, len(s))
    out.append(s[:at] + rng.choice(POOL) + s[at:])
    return out


def strings_for(text, sample):
    alphabet = list(set(text) | set(rng.sample(POOL, 6)))
    out = ["", text]
    if sample:
        for _ in range(6):
            s = sample(rng)
            out.append(s)
            out.extend(near_misses(s))
    for _ in range(5):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))))
    return list(dict.fromkeys(s for s in out if len(s) <= 12))


class TooSlow(Exception):
    pass


def too_slow(*_):
    raise TooSlow()


def python_verdict(pattern, strings):
    """(refused, [fullmatch of each string]) under Python's re; None when Python's backtracking takes over
    PYTHON_S on them (a random pattern with nested quantifiers can take exponential time: it is skipped
    and counted, never compared; cbatch's DFA has no such case)."""
    try:
        compiled = re.compile(pattern, re.ASCII)
    except (re.error, OverflowError, RecursionError):
        return True, None
    signal.setitimer(signal.ITIMER_REAL, PYTHON_S)
    try:
        return False, [compiled.fullmatch(s) is not None for s in strings]
    except TooSlow:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


PYTHON_S = 1.0
signal.signal(signal.SIGALRM, too_slow)


# The sanitizer build (about 10x slower) compares a fifth of the patterns; the fuzz target covers its robustness.
SHARE = 5 if os.environ.get("CBATCH_SANITIZED") == "1" else 1
cases = []
for _ in range(3000 // SHARE):
    text, sample = random_pattern()
    cases.append((text, strings_for(text, sample)))
for text in HOSTILE:
    cases.append((text, strings_for(text, None)))
for _ in range(800 // SHARE):
    text, _ = random_pattern() if rng.random() < 0.8 else (rng.choice(HOSTILE), None)
    text = mutated(text)
    cases.append((text, strings_for(text, None)))

start = time.monotonic()
lines = "".join(json.dumps({"pattern": p, "strings": s}) + "\n" for p, s in cases)
proc = subprocess.run([TOOL], input=lines, capture_output=True, text=True, encoding="utf-8")
tool_s = time.monotonic() - start
c = Checks()
c.check(proc.returncode == 0, f"regex_match exited {proc.returncode}: {proc.stderr[-2000:]}")
answers = [json.loads(line) for line in proc.stdout.splitlines()]
c.check(len(answers) == len(cases), f"{len(answers)} answers to {len(cases)} patterns")

stats = {"too slow in Python": 0, "both accept": 0, "both refuse": 0, "cbatch refuses (documented)": 0, "strings compared": 0, "full matches": 0}
for (pattern, strings), answer in zip(cases, answers):
    verdict = python_verdict(pattern, strings)
    if verdict is None:
        stats["too slow in Python"] += 1
        continue
    py_refused, py_matches = verdict
    if py_refused:
        c.check(not answer["accepted"], f"(a) Python refuses {pattern!r}, cbatch accepts it")
        stats["both refuse"] += not answer["accepted"]
        continue
    if not answer["accepted"]:
        documented = any(phrase in answer["error"] for phrase in DOCUMENTED)
        c.check(documented, f"(c) cbatch refuses {pattern!r} (Python takes it) with no documented reason: {answer['error']}")
        stats["cbatch refuses (documented)"] += documented
        continue
    stats["both accept"] += 1
    for s, py, got in zip(strings, py_matches, answer["matches"]):
        c.check(py == got, f"(b) {pattern!r} on {s!r}: Python {py}, cbatch {got}")
        stats["strings compared"] += 1
        stats["full matches"] += py
print(f"{len(cases)} patterns ({time.monotonic() - start:.1f} s, the tool {tool_s:.1f} s): " +
      ", ".join(f"{k} {v}" for k, v in stats.items()))
# The comparison is only worth something if most patterns are taken and many strings match.
c.check(stats["both accept"] > 2000 // SHARE, f"only {stats['both accept']} patterns accepted by both")
c.check(stats["full matches"] > 10000 // SHARE, f"only {stats['full matches']} full matches compared")
c.check(stats["too slow in Python"] < 20, f"{stats['too slow in Python']} patterns too slow in Python")
c.check(stats["both refuse"] > 100 // SHARE, f"only {stats['both refuse']} patterns refused by both")
c.done()
