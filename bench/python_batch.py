"""A batch step through the Python APIs: 64 matchers filling one bitmask.

    python bench/python_batch.py [--batch 64] [--steps 200] [--threads 2] [--tokenizer smollm2]

64 matchers, each on a different MaskBench-dev schema, each walking that file's first valid
instance (the same token ids for all engines; files every engine compiles and whose instance
every engine accepts, taken in sha256(file name) order). Matcher i starts `i % 16` tokens into
its instance, so the batch is at mixed depths. One step = one timed call that fills the 64
rows of one int32 torch bitmask of shape (64, ceil(vocab/32)):

  - formwork: `formwork.batch_fill_next_token_bitmask(matchers, bitmask, indices)` (rayon);
  - XGrammar: `xgrammar.BatchGrammarMatcher(max_threads=T).batch_fill_next_token_bitmask`;
  - llguidance: `llguidance.torch.fill_next_token_bitmask_par(LLExecutor(num_threads=T), ...)`;

then (untimed) every matcher accepts its next token; a matcher at the end of its instance is
reset and starts again. The engines take turns at each step (the order rotates), so load on
the machine falls on all of them alike. All use T threads (default 2, this machine's cores;
formwork's through RAYON_NUM_THREADS). The whole walk runs twice from the same start: pass 1
meets every state for the first time (nothing warmed up for any engine), pass 2 repeats it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt_us, hf_tokenizer, load_case, maskbench_files, pct, versions  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default="smollm2", choices=["smollm2", "llama3"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)  # before formwork's pool starts

    import hashlib

    import torch

    import formwork
    import llguidance
    import llguidance.hf
    import llguidance.torch
    import xgrammar as xgr

    torch.set_num_threads(1)
    tok, eos = hf_tokenizer(a.tokenizer)
    V = len(tok)
    fw_info = formwork.TokenizerInfo.from_huggingface(tok, vocab_size=V, stop_token_ids=[eos])
    fw_comp = formwork.GrammarCompiler(fw_info)
    x_info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V, stop_token_ids=[eos])
    x_comp = xgr.GrammarCompiler(x_info, max_threads=1)
    l_tok = llguidance.hf.from_tokenizer(tok, n_vocab=V, eos_token=eos)
    print("versions:", json.dumps(versions()))

    # Pick the files: all three compile the schema and accept the first valid instance.
    files = sorted(maskbench_files(), key=lambda p: hashlib.sha256(p.name.encode()).hexdigest())
    chosen = []
    for p in files:
        if len(chosen) == a.batch:
            break
        try:
            schema, tests = load_case(p, tok)
        except Exception:  # noqa: BLE001
            continue
        toks = next((t for v, t in tests if v and len(t) >= 16), None)
        if toks is None:
            continue
        st = json.dumps(schema)
        try:
            fc = fw_comp.compile(formwork.Grammar.from_json_schema(st, key_order="any"))
            xc = x_comp.compile_json_schema(st, any_whitespace=True, strict_mode=False, any_order=True)
        except Exception:  # noqa: BLE001
            continue
        lm = llguidance.LLMatcher(l_tok, llguidance.LLMatcher.grammar_from_json_schema(st), log_level=0)
        if lm.is_error():
            continue
        fm, xm = formwork.Matcher(fc), xgr.GrammarMatcher(xc)
        if not (fm.accept_tokens(toks) and all(xm.accept_token(t) for t in toks) and lm.consume_tokens(toks)):
            continue
        fm.reset(), xm.reset(), lm.reset()
        chosen.append((p.name, toks, fm, xm, lm))
    if len(chosen) < a.batch:
        sys.exit(f"only {len(chosen)} usable files")
    print(f"{a.batch} matchers on {a.batch} schemas; instance lengths {min(len(c[1]) for c in chosen)}-{max(len(c[1]) for c in chosen)} tokens", file=sys.stderr)

    fw_ms = [c[2] for c in chosen]
    x_ms = [c[3] for c in chosen]
    l_ms = [c[4] for c in chosen]
    indices = list(range(a.batch))
    l_pairs = [(m, i) for i, m in enumerate(l_ms)]
    x_batch = xgr.BatchGrammarMatcher(max_threads=a.threads)
    l_exec = llguidance.LLExecutor(num_threads=a.threads)
    bitmask = torch.full((a.batch, (V + 31) // 32), -1, dtype=torch.int32)

    fills = {
        "formwork": lambda: formwork.batch_fill_next_token_bitmask(fw_ms, bitmask, indices),
        "xgrammar": lambda: x_batch.batch_fill_next_token_bitmask(x_ms, bitmask, indices),
        "llguidance": lambda: llguidance.torch.fill_next_token_bitmask_par(l_exec, l_pairs, bitmask),
    }
    accept = {
        "formwork": lambda m, t: m.accept_token(t),
        "xgrammar": lambda m, t: m.accept_token(t),
        "llguidance": lambda m, t: m.consume_token(t),
    }
    matchers = {"formwork": fw_ms, "xgrammar": x_ms, "llguidance": l_ms}
    names = list(fills)
    start = [i % 16 for i in range(a.batch)]
    results = {}
    for pass_no in (1, 2):
        times = {n: [] for n in names}
        pos = list(start)
        for n in names:
            for m, (_, toks, *_r), p in zip(matchers[n], chosen, pos):
                m.reset()
                assert accept[n] is not None
                for t in toks[:p]:
                    assert accept[n](m, t)
        for step in range(a.steps):
            order = names[step % 3:] + names[: step % 3]
            for n in order:
                t0 = time.perf_counter_ns()
                fills[n]()
                times[n].append((time.perf_counter_ns() - t0) / 1000.0)
            for i, (_, toks, *_r) in enumerate(chosen):
                if pos[i] == len(toks):
                    for n in names:
                        matchers[n][i].reset()
                    pos[i] = 0
                    continue
                t = toks[pos[i]]
                for n in names:
                    assert accept[n](matchers[n][i], t), (n, chosen[i][0], pos[i])
                pos[i] += 1
        results[pass_no] = {}
        for n in names:
            xs = sorted(times[n])
            results[pass_no][n] = {"p50": pct(xs, 50), "p99": pct(xs, 99), "max": xs[-1], "mean": sum(xs) / len(xs)}
        print(f"\npass {pass_no} ({'first time through every state' if pass_no == 1 else 'the same walk again'}), "
              f"{a.steps} steps of {a.batch} matchers, {a.threads} threads:")
        print("| engine | step p50 | step p99 | max | mean |")
        print("|---|---|---|---|---|")
        for n in names:
            r = results[pass_no][n]
            print(f"| {n} | {fmt_us(r['p50'])} | {fmt_us(r['p99'])} | {fmt_us(r['max'])} | {fmt_us(r['mean'])} |")
        f = results[pass_no]["formwork"]
        for n in names[1:]:
            r = results[pass_no][n]
            print(f"| formwork / {n} | {f['p50'] / r['p50']:.2f}× | {f['p99'] / r['p99']:.2f}× | {f['max'] / r['max']:.2f}× | {f['mean'] / r['mean']:.2f}× |")
    if a.out:
        Path(a.out).write_text(json.dumps({"versions": versions(), "batch": a.batch, "steps": a.steps, "threads": a.threads, "results": results}, indent=1))


if __name__ == "__main__":
    main()
