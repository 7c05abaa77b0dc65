#!/usr/bin/env python3
"""Checks that the arrows between the source rooms, and inside each room, run one way (docs/architecture.md).

Every #include "engine/<room>/..." or "cuda/..." in engine/, cmd/ and cuda/ is an arrow from the
including file's room to the included file's room (cuda/ with all its folders is one room). An arrow may only go to a room of a lower rank;
rooms of the same rank (siblings) do not include each other, and only cmd/ includes the optional
cuda/. Inside a room the arrows join modules (a header and its sources: foo.hpp, foo.cpp, foo.cu are
one module) and must not go round: a dispatcher and its parts share a small header of their own rather
than include each other. Prints each arrow that goes against the order, "file:line: room -> room
(header)", and each cycle of modules inside a room, and exits 1 when there is one; exits 0 when there is
none.
Usage: check_layers.py [SOURCE_ROOT]   (default: the checkout this script lives in)
"""
import pathlib
import re
import sys

# Rank of each room: a room includes only rooms of a lower rank.
RANKS = {
    "cmd": 8,                    # the command line
    "scale": 7, "bench": 7,      # shards and their merge; benchmark workloads and reports
    "io": 6,                     # request files, result and summary lines, resume, trace
    "core": 5,                   # the engine loop, schedulers, block manager, run statistics
    "cpu": 4, "cuda": 4,         # the backends
    "backend": 3,                # the backend interface and what crosses it (ragged batch, roofline)
    "model": 2, "constrain": 2,  # model formats and configs; structured-output constraints
    "text": 1, "sample": 1,      # tokenizers and chat templates; sampling and log-probabilities
    "base": 0,                   # the ground room: errors, host/device markers, requests and results
}
# The CUDA backend is optional (engine/ builds without it): only the command line may include it.
ONLY_FROM = {"cuda": {"cmd"}}
SOURCE_DIRS = ("engine", "cmd", "cuda")
SUFFIXES = {".hpp", ".cpp", ".cuh", ".cu", ".h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:engine/[^/"]+|cuda)/[^"]+)"')


def room_of(rel_path):
    parts = pathlib.PurePosixPath(rel_path).parts
    if parts[0] == "engine":
        return parts[1] if len(parts) > 2 else None
    return parts[0]


def back_arrows(root):
    found = []
    for top in SOURCE_DIRS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            src = room_of(rel)
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                dst = room_of(match.group(1))
                if src == dst:
                    continue
                if src not in RANKS or dst not in RANKS:
                    unknown = src if src not in RANKS else dst
                    found.append(f"{rel}:{number}: room '{unknown}' has no rank in tools/check_layers.py")
                elif RANKS[dst] >= RANKS[src] or src not in ONLY_FROM.get(dst, {src}):
                    found.append(f"{rel}:{number}: {src} -> {dst} ({match.group(1)})")
    return found


def module_of(rel_path):
    """A header and its sources are one module: their path without the suffix."""
    return str(pathlib.PurePosixPath(rel_path).with_suffix(""))


def room_cycles(root):
    """Cycles of modules that include each other inside one room, each as "room: a -> b -> a (where)"."""
    edges = {}  # module -> {included module: "file:line"}
    for top in SOURCE_DIRS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            src = module_of(rel)
            edges.setdefault(src, {})
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match or room_of(match.group(1)) != room_of(rel):
                    continue
                dst = module_of(match.group(1))
                if dst != src:
                    edges[src].setdefault(dst, f"{rel}:{number}")
    found, state = [], {}  # state: 1 on the current path, 2 done

    def visit(module, path):
        state[module] = 1
        for nxt in sorted(edges.get(module, {})):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                where = ", ".join(edges[a][b] for a, b in zip(cycle, cycle[1:]))
                found.append(f"{room_of(module + '.hpp')}: {' -> '.join(cycle)} ({where})")
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    arrows = back_arrows(root)
    cycles = room_cycles(root)
    for cycle in cycles:
        print(f"cycle inside the room {cycle}")
    if cycles:
        print(f"{len(cycles)} include cycle(s) inside a room: give the shared part a small header of its own")
        return 1
    for arrow in arrows:
        print(arrow)
    if arrows:
        print(f"{len(arrows)} include(s) against the layer order (docs/architecture.md)")
        return 1
    print("layers: every include runs down the order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
