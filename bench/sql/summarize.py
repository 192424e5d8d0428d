#!/usr/bin/env python3
"""The per-mode table of `formwork bench sql` from one or more `--log` files (JSON lines,
one per generated query), e.g. a run cut short, or one split into parts:

    python3 bench/sql/summarize.py run1.jsonl [run2.jsonl ...] [--per-db] [--halves]

--halves adds a table per half of the questions (A: the low bit of sha256(question)[0] is
0, as `bench sql --half` splits them; tune on A, report on B).

Same definitions as the bench: parse = the database prepares the query; exec error = it
does not run; hallucinated = the error names a missing table or column; exec acc = its rows
equal the gold query's; tok/s = generated tokens over generation time.
"""

import hashlib
import json
import sys
from collections import OrderedDict


def table(rows, title=None):
    modes = OrderedDict()
    for o in rows:
        modes.setdefault(o["mode"], []).append(o)
    out = []
    if title:
        out.append(title)
    out.append("| mode | queries | parse | exec error | hallucinated | exec acc | tok/s |")
    out.append("|---|---|---|---|---|---|---|")
    for m in ["free", "generic", "schema", "full"]:
        os_ = modes.get(m)
        if not os_:
            continue
        n = len(os_)
        pct = lambda k: 100.0 * sum(bool(o[k]) for o in os_) / n
        tok = sum(o["tokens"] for o in os_) / max(1e-9, sum(o.get("eval_seconds", 0.0) for o in os_))
        out.append(f"| {m} | {n} | {pct('parses'):.1f} % | {pct('error'):.1f} % | {pct('hallucinated'):.1f} % | {pct('correct'):.1f} % | {tok:.1f} |")
    return "\n".join(out)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    rows = [json.loads(line) for path in args for line in open(path) if line.strip()]
    print(table(rows))
    if "--halves" in sys.argv:
        for half, bit in (("A (tuning)", 0), ("B (report)", 1)):
            print()
            print(table([o for o in rows if hashlib.sha256(o["question"].encode()).digest()[0] & 1 == bit], f"half {half}:"))
    if "--per-db" in sys.argv:
        for db in sorted({o["db"] for o in rows}):
            print()
            print(table([o for o in rows if o["db"] == db], f"{db}:"))


if __name__ == "__main__":
    main()
