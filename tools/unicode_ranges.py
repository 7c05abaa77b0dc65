"""Shared by the generators of engine/text's Unicode tables (gen_unicode_tables.py, gen_bert_tables.py):
the code points grouped into sorted, disjoint ranges of equal class flags, and the C++ initializer rows
wrapped at a line width."""


def flag_ranges(flags_of):
    """[first, last, flags] for each maximal run of code points with the same nonzero flags_of(cp)."""
    out = []
    for cp in range(0x110000):
        f = flags_of(cp)
        if f == 0:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == f:
            out[-1][1] = cp
        else:
            out.append([cp, cp, f])
    return out


def write_rows(w, items, per_line_chars=110):
    """The items (each " {...},") as indented lines of at most per_line_chars, then the closing "};"."""
    line = "   "
    for item in items:
        if len(line) + len(item) > per_line_chars:
            w(line + "\n")
            line = "   "
        line += item
    w(line + "\n};\n")
