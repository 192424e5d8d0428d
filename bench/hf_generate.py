"""transformers end to end: `model.generate()` with and without `formwork.hf.LogitsProcessor`.

    python bench/hf_generate.py [--rounds 4] [--max-new-tokens 96] [--threads 1] [--xgrammar]

SmolLM2-135M-Instruct as the Python package's tests load it (the default GGUF dequantized by
transformers into $FORMWORK_HOME/hf/SmolLM2-135M-Instruct-from-Q4_1; run
`bash crates/python/tests/run.sh -k hf` once to make it), float32 on the CPU,
`torch.set_num_threads(1)` as the tests do (`--threads` to change it). Greedy, batch 1, three
chat prompts, exactly `--max-new-tokens` new tokens per call: EOS is not a stopping criterion
in either mode, and the schema (a list of at least 12 people) cannot be complete within that
budget, so the constraint is live at every generated token (EOS is swapped for an id that
neither mode generates). The grammar is compiled once
before timing (a compiled grammar is cached and reused across requests); each timed call
makes a fresh processor. Modes alternate within each round (the order flips every round),
one untimed call of each mode first. tokens/s = generated tokens / wall time of the
`generate()` calls (prompt processing included, the same in both modes).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions  # noqa: E402

FORMWORK_HOME = Path(os.environ.get("FORMWORK_HOME", Path.home() / ".cache" / "formwork"))
HF_CACHE = FORMWORK_HOME / "hf" / "SmolLM2-135M-Instruct-from-Q4_1"

SCHEMA = {
    "type": "object",
    "properties": {
        "people": {
            "type": "array",
            "minItems": 12,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "minimum": 0},
                    "city": {"type": "string"},
                },
                "required": ["name", "age", "city"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["people"],
    "additionalProperties": False,
}
PROMPTS = [
    "List twelve people with their name, age and city, as JSON.",
    "Give me a JSON list of twelve fictional characters: name, age, home city.",
    "Twelve members of a chess club (name, age, city) in JSON, please.",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--xgrammar", action="store_true", help="also XGrammar's own transformers processor (xgrammar.contrib.hf)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import formwork
    import formwork.hf

    if not (HF_CACHE / "config.json").exists():
        sys.exit(f"{HF_CACHE} is missing: run `bash crates/python/tests/run.sh -k hf` once (it converts the GGUF)")
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(str(HF_CACHE))
    model = AutoModelForCausalLM.from_pretrained(str(HF_CACHE), dtype=torch.float32)
    model.eval()
    print("versions:", json.dumps(versions()), f"torch threads {torch.get_num_threads()}")

    info = formwork.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    compiled = formwork.GrammarCompiler(info).compile_json_schema(SCHEMA)
    makers = {"unconstrained": lambda: [], "formwork": lambda: [formwork.hf.LogitsProcessor(compiled)]}
    if a.xgrammar:
        import xgrammar as xgr
        import xgrammar.contrib.hf

        xinfo = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
        xcompiled = xgr.GrammarCompiler(xinfo).compile_json_schema(json.dumps(SCHEMA))
        makers["xgrammar"] = lambda: [xgrammar.contrib.hf.LogitsProcessor(xcompiled)]

    gen = copy.deepcopy(model.generation_config)
    # Every call generates exactly max_new_tokens: EOS (2) is replaced by the vocabulary's last
    # id, which neither mode produces here (checked below). (`eos_token_id=None` is not enough:
    # transformers then takes the model's default, 2.)
    gen.eos_token_id = model.config.vocab_size - 1
    gen.max_new_tokens = a.max_new_tokens
    gen.do_sample = False
    gen.pad_token_id = 2
    inputs = []
    for p in PROMPTS:
        text = tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        inputs.append(tok(text, return_tensors="pt"))

    def call(mode, enc):
        with torch.no_grad():
            t0 = time.perf_counter()
            out = model.generate(**enc, generation_config=gen, logits_processor=makers[mode]())
            dt = time.perf_counter() - t0
        new = out[0, enc["input_ids"].shape[1]:].tolist()
        return dt, new

    for mode in makers:  # warm-up, untimed
        call(mode, inputs[0])
    totals = {m: [0.0, 0] for m in makers}
    per_round = {m: [] for m in makers}
    sample = {}
    for r in range(a.rounds):
        modes = list(makers) if r % 2 == 0 else list(reversed(makers))
        round_t = {m: [0.0, 0] for m in makers}
        for enc in inputs:
            for mode in modes:
                dt, new = call(mode, enc)
                assert len(new) == a.max_new_tokens, (mode, len(new))
                totals[mode][0] += dt
                totals[mode][1] += len(new)
                round_t[mode][0] += dt
                round_t[mode][1] += len(new)
                if mode != "unconstrained" and enc is inputs[0]:
                    sample[mode] = tok.decode(new)
        for m in makers:
            per_round[m].append(round_t[m][1] / round_t[m][0])
        print(f"round {r + 1}: " + ", ".join(f"{m} {per_round[m][-1]:.1f} tok/s" for m in makers), file=sys.stderr)
    print(f"\n{a.rounds} rounds x {len(PROMPTS)} prompts, {a.max_new_tokens} new tokens each, greedy, torch threads {a.threads}:")
    print("| mode | tokens/s | per round (min-max) | ratio to unconstrained | added per token |")
    print("|---|---|---|---|---|")
    u = totals["unconstrained"][1] / totals["unconstrained"][0]
    res = {}
    for m, (t, n) in totals.items():
        tps = n / t
        added = (t / n - 1 / u) * 1e6
        res[m] = {"tokens_per_s": tps, "ratio": tps / u, "added_us_per_token": added, "rounds": per_round[m]}
        print(f"| {m} | {tps:.1f} | {min(per_round[m]):.1f}-{max(per_round[m]):.1f} | {tps / u:.3f} | {added:.0f} µs |")
    for m, s in sample.items():
        print(f"\n{m}, prompt 1 (first {a.max_new_tokens} tokens): {s!r}")
    if a.out:
        Path(a.out).write_text(json.dumps({"versions": versions(), "threads": a.threads, "max_new_tokens": a.max_new_tokens, "results": res}, indent=1))


if __name__ == "__main__":
    main()
