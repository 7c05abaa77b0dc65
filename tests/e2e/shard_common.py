"""Helpers of the shard tests: an input with valid, invalid and blank lines (and ids used twice, within
a shard and across shards), the output text with timing metrics masked, and the input line each output
line answers."""
import json
import re

from common import read_jsonl

REUSED_ID_LINES = (18, 21)  # lines that reuse line 5's id (all three are simple, valid lines)
# Timing metrics, OpenAI's creation time, and cached_tokens: which prompts share a prefix cache depends
# on which of them one process ran.
TIMING = re.compile(rb'"(ttft_ms|e2e_ms|first_step|finish_step|created|cached_tokens)": [0-9.eE+-]+')


def masked(path):
    """The file's bytes with the timing metrics (and OpenAI's creation time, cached_tokens) replaced by T."""
    with open(path, "rb") as f:
        return TIMING.sub(rb'"\1": T', f.read())


def mixed_prompts(path, num_lines, max_tokens=6):
    """Writes the test input; returns its lines (blank ones as "")."""
    lines = []
    for i in range(1, num_lines + 1):
        row = {"id": f"q{i}", "prompt": f"line {i} of the shard test " * (1 + i % 3), "max_tokens": max_tokens,
               "temperature": 0}
        if i % 11 == 4:
            lines.append("")  # blank: no output line, but it keeps its number
            continue
        if i % 9 == 2:
            lines.append('{"id": "broken", "prompt": ')  # invalid JSON
            continue
        if i % 13 == 6:
            row["max_tokens"] = "many"  # wrong type
        if i % 10 == 7:
            row = {"custom_id": f"c{i}", "method": "POST", "url": "/v1/completions",
                   "body": {"prompt": f"openai {i}", "max_tokens": max_tokens, "temperature": 0}}
        if i in REUSED_ID_LINES:
            row["id"] = "q5"  # the id of line 5 again
        lines.append(json.dumps(row))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def answered_lines(path, input_lines, owns=lambda n: True):
    """The input line each output line answers: errors by "line", OpenAI lines by their id, results by the
    first line (of those `owns` accepts: a shard's) with their id."""
    first_line_of = {}
    for n, text in enumerate(input_lines, 1):
        try:
            row = json.loads(text)
        except ValueError:
            continue
        if owns(n):
            first_line_of.setdefault(row.get("custom_id", row.get("id")), n)
    lines = []
    for row in read_jsonl(path):
        if "line" in row:
            lines.append(row["line"])
        elif "custom_id" in row:
            lines.append(int(row["id"].split("-")[1]))
        else:
            lines.append(first_line_of.get(row["id"]))
    return lines
