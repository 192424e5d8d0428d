"""MaskBench through the Python APIs: formwork vs llguidance vs XGrammar, one process.

    python bench/python_masks.py [--tokenizer smollm2|llama3] [--limit N] [--out FILE.json]

For every JSON-schema file of the MaskBench dev split (../shared/data/maskbench-dev), each
engine compiles the schema and walks every test instance token by token as the mask-engine
protocol says (../shared/MASK_PROTOCOL.md): at each step fill the next-token bitmask (timed,
through the package's public Python call, Python overhead included), check the next token's
bit, accept it; after the last token fill once more and check that EOS is allowed.

  - TTFM (time to first mask) = compiling the schema + making a matcher + the first
    `fill_next_token_bitmask`; TBM (time between masks) = every later fill.
  - All engines get the same token ids (the instance serialized with compact separators and
    tokenized once by the HF tokenizer), the same int32 torch bitmask of shape
    (1, ceil(vocab/32)) in XGrammar's layout, and the same schema text. Nothing is warmed
    up for any engine. The engines take turns first on successive files. Python's garbage
    collector is off while a file is walked and runs in full before each engine's turn on
    a file (`--no-gc-between`: never), for all engines. That full run walks the whole Python
    heap just before the timed compile, so the compile starts with cold caches: formwork's
    TTFM p50 on `--sample 4` is ~1.0 ms with it and 0.46–0.64 ms without (alone; ~0.8 ms
    without it but with llguidance taking turns).
  - Each engine uses its JSON-Schema semantics closest to MaskBench's (additional
    properties allowed when `additionalProperties` is absent, flexible whitespace, keys in
    any order where the engine offers it): formwork `key_order="any"`; XGrammar
    `strict_mode=False, any_order=True, any_whitespace=True`, compiler `max_threads=1`
    (MaskBench is single-threaded; the other two compile on one thread); llguidance its
    defaults (flexible whitespace).
  - A file an engine refuses (an exception or error state at compile) counts as refused for
    that engine only. pass = every valid instance accepted and every invalid one rejected.

The files are split into halves A and B by sha256(file name) (bench/common.py: half_of), and
every figure is reported per half.
"""

from __future__ import annotations

import argparse
import gc
import json
import hashlib
import sys
import queue
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt_us, half_of, hf_tokenizer, load_case, maskbench_files, pct, versions  # noqa: E402

import torch  # noqa: E402

perf = time.perf_counter_ns


class Refused(Exception):
    pass


class Formwork:
    name = "formwork"

    def __init__(self, tok, eos, vocab_size):
        import formwork

        self.fw = formwork
        self.info = formwork.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size, stop_token_ids=[eos])
        self.compiler = formwork.GrammarCompiler(self.info)

    def compile(self, schema_text):
        try:
            return self.compiler.compile(self.fw.Grammar.from_json_schema(schema_text, key_order="any"))
        except self.fw.FormworkError as e:
            raise Refused(str(e)) from None

    def first_matcher(self, c):
        return self.fw.Matcher(c)

    def pristine(self, c, m):
        return c

    def new_matcher(self, p):
        return self.fw.Matcher(p)

    @staticmethod
    def fill(m, bm):
        m.fill_next_token_bitmask(bm, 0)

    @staticmethod
    def accept(m, t):
        return m.accept_token(t)


class XGrammar:
    name = "xgrammar"

    def __init__(self, tok, eos, vocab_size):
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size, stop_token_ids=[eos])
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)

    def compile(self, schema_text):
        try:
            return self.compiler.compile_json_schema(schema_text, any_whitespace=True, strict_mode=False, any_order=True)
        except Exception as e:  # noqa: BLE001 - XGrammar raises several types
            raise Refused(f"{type(e).__name__}: {e}") from None

    def first_matcher(self, c):
        return self.xgr.GrammarMatcher(c)

    def pristine(self, c, m):
        return c

    def new_matcher(self, p):
        return self.xgr.GrammarMatcher(p)

    @staticmethod
    def fill(m, bm):
        m.fill_next_token_bitmask(bm, 0)

    @staticmethod
    def accept(m, t):
        return m.accept_token(t)


class Llguidance:
    name = "llguidance"

    def __init__(self, tok, eos, vocab_size):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab_size, eos_token=eos)
        self._fill = llguidance.torch.fill_next_token_bitmask

    def compile(self, schema_text):
        # LLMatcher's constructor compiles the grammar (llguidance has no separate compiled
        # object); it does not raise on a refusal but enters an error state.
        g = self.llg.LLMatcher.grammar_from_json_schema(schema_text)
        m = self.llg.LLMatcher(self.tok, g, log_level=0)
        if m.is_error():
            raise Refused(m.get_error())
        return m

    def first_matcher(self, c):
        return c

    def pristine(self, c, m):
        return m.deep_copy()  # the fill above does not change the state

    def new_matcher(self, p):
        return p.deep_copy()

    def fill(self, m, bm):
        self._fill(m, bm, 0)

    @staticmethod
    def accept(m, t):
        return m.consume_token(t)


ENGINES = {"formwork": Formwork, "llguidance": Llguidance, "xgrammar": XGrammar}


_WORKER = []


def _worker():
    """The queue of the long-lived compile worker thread (started on first use)."""
    if not _WORKER:
        q = queue.Queue()

        def loop():
            while True:
                job, done = q.get()
                job()
                done.set()

        threading.Thread(target=loop, daemon=True).start()
        _WORKER.append(q)
    return _WORKER[0]


def run_file(eng, schema_text, tests, eos, bm, words, compile_timeout):
    """Compiles and walks one file on one engine; a dict of what happened."""
    out = {"ttfm": None, "tbm": [], "tests": []}
    # The compile runs on a worker thread (all three release the GIL while compiling) so that
    # one exceeding the time limit counts as refused instead of stopping the run; it is timed
    # inside the thread. The worker is long-lived, as a serving engine's compile pool is
    # (a fresh thread per file before; the figures moved within noise). (A compile that
    # times out keeps running on its worker until it ends: a new worker takes the next files.)
    box = {}

    def work():
        t = perf()
        try:
            box["c"] = eng.compile(schema_text)
        except Refused as e:
            box["e"] = str(e)[:300]
        except Exception as e:  # noqa: BLE001
            box["e"] = f"{type(e).__name__}: {e}"[:300]
        box["us"] = (perf() - t) / 1000.0

    done = threading.Event()
    _worker().put((work, done))
    if not done.wait(compile_timeout):
        _WORKER.clear()  # that worker is stuck on this compile; the next file gets a new one
        out["refused"] = f"timeout: compiling took over {compile_timeout:.0f} s"
        return out
    if "e" in box:
        out["refused"] = box["e"]
        return out
    c = box["c"]
    t0 = perf()
    m = eng.first_matcher(c)
    eng.fill(m, bm)
    out["ttfm"] = box["us"] + (perf() - t0) / 1000.0
    first_done = True
    p = eng.pristine(c, m)
    fill, accept, tbm = eng.fill, eng.accept, out["tbm"]
    for i, (valid, toks) in enumerate(tests):
        if i > 0:
            m = eng.new_matcher(p)
        verdict = "accepted"
        try:
            for t in toks:
                if first_done:
                    first_done = False
                else:
                    a = perf()
                    fill(m, bm)
                    tbm.append((perf() - a) / 1000.0)
                if not (int(words[t >> 5]) >> (t & 31)) & 1:
                    verdict = "mask"
                    break
                if not accept(m, t):
                    verdict = "consume"
                    break
            else:
                if first_done:  # an empty instance
                    first_done = False
                else:
                    a = perf()
                    fill(m, bm)
                    tbm.append((perf() - a) / 1000.0)
                if not (int(words[eos >> 5]) >> (eos & 31)) & 1:
                    verdict = "eos"
        except Exception as e:  # noqa: BLE001
            verdict = f"exception: {type(e).__name__}: {e}"[:200]
        out["tests"].append((valid, verdict))
    return out


def summarize(results, names, half):
    """Per-engine figures over the files of `half` (None: all)."""
    rows = {}
    common = None
    for n in names:
        ok = {f for f, r in results[n].items() if (half is None or r["half"] == half) and r["ttfm"] is not None}
        common = ok if common is None else common & ok
    for n in names:
        files = {f: r for f, r in results[n].items() if half is None or r["half"] == half}
        compiled = [r for r in files.values() if r["ttfm"] is not None]
        passed = valid_rej = invalid_acc = 0
        for r in compiled:
            good = True
            for valid, verdict in r["tests"]:
                acc = verdict == "accepted"
                if valid and not acc:
                    valid_rej += 1
                    good = False
                if not valid and acc:
                    invalid_acc += 1
                    good = False
            passed += good
        tbm = sorted(x for r in compiled for x in r["tbm"])
        tbm_common = sorted(x for f, r in files.items() if f in common for x in r["tbm"])
        ttfm = sorted(r["ttfm"] for r in compiled)
        rows[n] = {
            "files": len(files),
            "compiled": len(compiled),
            "refused": len(files) - len(compiled),
            "passed": passed,
            "valid_rejected": valid_rej,
            "invalid_accepted": invalid_acc,
            "masks": len(tbm),
            "ttfm_p50": pct(ttfm, 50),
            "ttfm_p99": pct(ttfm, 99),
            "ttfm_max": ttfm[-1] if ttfm else float("nan"),
            "tbm_p50": pct(tbm, 50),
            "tbm_p99": pct(tbm, 99),
            "tbm_max": tbm[-1] if tbm else float("nan"),
            "common_files": len(common),
            "common_masks": len(tbm_common),
            "common_tbm_p50": pct(tbm_common, 50),
            "common_tbm_p99": pct(tbm_common, 99),
            "common_tbm_max": tbm_common[-1] if tbm_common else float("nan"),
        }
        slow = sorted(((max(r["tbm"]), f) for f, r in files.items() if r["tbm"]), reverse=True)[:3]
        rows[n]["slowest_mask_files"] = [(f, round(x, 1)) for x, f in slow]
    return rows


def print_table(rows, title):
    names = list(rows)
    print(f"\n### {title}")
    print("| engine | compiled / refused | pass | valid rejected | invalid accepted | masks | TTFM p50 | TTFM p99 | TBM p50 | TBM p99 | TBM max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in names:
        r = rows[n]
        print(
            f"| {n} | {r['compiled']} / {r['refused']} | {r['passed']} | {r['valid_rejected']} | {r['invalid_accepted']} | {r['masks']} "
            f"| {fmt_us(r['ttfm_p50'])} | {fmt_us(r['ttfm_p99'])} | {fmt_us(r['tbm_p50'])} | {fmt_us(r['tbm_p99'])} | {fmt_us(r['tbm_max'])} |"
        )
    if "formwork" in rows:
        f = rows["formwork"]
        for n in names:
            if n == "formwork":
                continue
            r = rows[n]
            ratio = lambda k: f"{f[k] / r[k]:.2f}×" if r[k] and r[k] == r[k] else "-"  # noqa: E731
            print(f"| formwork / {n} | | | | | | {ratio('ttfm_p50')} | {ratio('ttfm_p99')} | {ratio('tbm_p50')} | {ratio('tbm_p99')} | {ratio('tbm_max')} |")
    r0 = rows[names[0]]
    print(f"\nOn the {r0['common_files']} files every engine compiled (TBM p50 / p99 / max, masks):")
    for n in names:
        r = rows[n]
        print(f"  {n:10} {fmt_us(r['common_tbm_p50'])} / {fmt_us(r['common_tbm_p99'])} / {fmt_us(r['common_tbm_max'])}  ({r['common_masks']} masks)")
    if "formwork" in rows:
        f = rows["formwork"]
        for n in names:
            if n != "formwork":
                print(f"  formwork / {n}: p99 {f['common_tbm_p99'] / rows[n]['common_tbm_p99']:.2f}×")
    for n in names:
        print(f"  slowest masks, {n}: {rows[n]['slowest_mask_files']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default="smollm2", choices=["smollm2", "llama3"])
    ap.add_argument("--limit", type=int, default=None, help="only the first N files (sorted by name)")
    ap.add_argument("--engines", default="formwork,llguidance,xgrammar")
    ap.add_argument("--sample", type=int, default=1, help="only files with sha256(name) byte 1 %% SAMPLE == 0 (a deterministic 1/SAMPLE of both halves)")
    ap.add_argument("--no-gc-between", action="store_true",
                    help="skip the full garbage collection before each engine's turn on a file: it walks the whole Python heap "
                         "right before the timed compile and leaves the caches cold for it (TTFM p50 about 2x), for every engine")
    ap.add_argument("--compile-timeout", type=float, default=20.0, help="seconds; a slower compile counts as refused")
    ap.add_argument("--out", default=None, help="write the summaries (and versions) as JSON here")
    ap.add_argument("--jsonl", default=None, help="append each file's per-engine results here as they finish")
    ap.add_argument("--from-jsonl", default=None, help="only summarize a (possibly partial) --jsonl file")
    a = ap.parse_args()

    names = a.engines.split(",")
    if a.from_jsonl:
        results = {n: {} for n in names}
        for line in open(a.from_jsonl):
            r = json.loads(line)
            results[r["engine"]][r["file"]] = r
        report(results, names, a)
        return
    torch.set_num_threads(1)
    tok, eos = hf_tokenizer(a.tokenizer)
    vocab_size = len(tok)
    t = time.time()
    engines = [ENGINES[n](tok, eos, vocab_size) for n in names]
    print(f"tokenizer {a.tokenizer}: vocab {vocab_size}, EOS {eos}; engines ready in {time.time() - t:.1f} s", file=sys.stderr)
    print("versions:", json.dumps(versions()))

    bm = torch.full((1, (vocab_size + 31) // 32), -1, dtype=torch.int32)
    words = bm.numpy()[0]  # the same memory, read for the bit checks

    files = [p for p in maskbench_files(a.limit) if hashlib.sha256(p.name.encode()).digest()[1] % a.sample == 0]
    jsonl = open(a.jsonl, "a") if a.jsonl else None
    results = {n: {} for n in names}
    started = time.time()
    gc.disable()
    for k, path in enumerate(files):
        try:
            schema, tests = load_case(path, tok)
        except Exception as e:  # noqa: BLE001
            print(f"skipping {path.name}: {e}", file=sys.stderr)
            continue
        schema_text = json.dumps(schema)
        h = half_of(path.name)
        order = engines[k % len(engines):] + engines[: k % len(engines)]
        for eng in order:
            if not a.no_gc_between:
                gc.collect()
            r = run_file(eng, schema_text, tests, eos, bm, words, a.compile_timeout)
            r["half"] = h
            results[eng.name][path.name] = r
            if jsonl:
                jsonl.write(json.dumps({"engine": eng.name, "file": path.name, **r}) + "\n")
                jsonl.flush()
        if (k + 1) % 100 == 0:
            print(f"  {k + 1} / {len(files)} files, {time.time() - started:.0f} s", file=sys.stderr)
    gc.enable()
    print(f"{len(files)} files in {time.time() - started:.0f} s", file=sys.stderr)

    report(results, names, a)


def report(results, names, a):
    summary = {"versions": versions(), "tokenizer": a.tokenizer, "halves": {}}
    for half in ("A", "B", None):
        rows = summarize(results, names, half)
        title = f"half {half}" if half else "all files"
        n_files = sum(1 for r in results[names[0]].values() if half is None or r["half"] == half)
        print_table(rows, f"{title} ({n_files} files, tokenizer {a.tokenizer})")
        for n in names:
            slow = sorted(f for f, r in results[n].items() if (half is None or r["half"] == half) and str(r.get("refused", "")).startswith("timeout"))
            if slow:
                print(f"  {n}: compile timed out on {slow}")
        summary["halves"][half or "all"] = rows
    if a.out:
        Path(a.out).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
