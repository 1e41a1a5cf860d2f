"""Reading `ncu --page source --csv --print-source sass` exports (shared by ncu_stalls.py and
ncu_sass_mix.py): the header row that carries the stall-sampling columns, the rows after it, and a
number parser for ncu's comma-grouped values."""
import csv


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def read_source_csv(path):
    """(header, body rows, {column name: index}), or (None, rows, {}) when no header has the
    "Warp Stall Sampling (All Samples)" column."""
    rows = list(csv.reader(open(path, newline="")))
    for i, r in enumerate(rows):
        if any("Warp Stall Sampling (All Samples)" in c for c in r):
            return r, rows[i + 1:], {name: k for k, name in enumerate(r)}
    return None, rows, {}
