"""Synthetic large schemas made only of the tuning half's files, to see how compile time grows
with a schema's size without looking at the report half's large files.

Takes every Kubernetes definition of half A of the MaskBench dev split (`common.half_of`), renames each file's definitions apart, and writes for each
N given a schema whose root object requires one property per definition (the first N, with the
definitions they reach), as a MaskBench-style file `{"schema": ...}`:

    python3 bench/large_schemas.py OUT_DIR 50 100 200 400
    cargo run --release -p formwork-schema --example ttfm_phases -- \\
        ../shared/data/tokenizers/smollm2.json OUT_DIR/syn_*.json
"""
import json
import os
import re
import sys

from common import MASKBENCH, half_of

REF = re.compile(r'"#/definitions/([^"]+)"')


def main():
    out, sizes = sys.argv[1], [int(n) for n in sys.argv[2:]]
    os.makedirs(out, exist_ok=True)
    files = sorted(f for f in MASKBENCH.glob("Kubernetes*.json") if half_of(f.name) == "A")
    defs = {}
    for i, f in enumerate(files):
        with open(f) as fh:
            schema = json.load(fh)["schema"]
        text = REF.sub(lambda m: '"#/definitions/f%d_%s"' % (i, m.group(1)), json.dumps(schema.get("definitions", {})))
        for k, v in json.loads(text).items():
            defs["f%d_%s" % (i, k)] = v
    names = list(defs)
    for n in sizes:
        chosen = names[:n]
        need, todo = set(), list(chosen)
        while todo:
            k = todo.pop()
            if k not in need:
                need.add(k)
                todo += REF.findall(json.dumps(defs[k]))
        schema = {
            "definitions": {k: defs[k] for k in sorted(need)},
            "type": "object",
            "properties": {"p%d" % j: {"$ref": "#/definitions/" + k} for j, k in enumerate(chosen)},
            "required": ["p%d" % j for j in range(len(chosen))],
        }
        path = os.path.join(out, "syn_%d.json" % n)
        with open(path, "w") as fh:
            json.dump({"schema": schema}, fh)
        print("%s: %d definitions, %d bytes" % (path, len(need), len(json.dumps(schema))))


if __name__ == "__main__":
    main()
