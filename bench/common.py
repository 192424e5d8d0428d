"""Shared helpers of the Python benchmarks: paths, the tokenizer set-up of the three engines,
the MaskBench files and their halves, percentiles and version strings."""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FORMWORK_SHARED_DATA", ROOT.parent / "shared" / "data"))
MASKBENCH = SHARED / "maskbench-dev"
TOKENIZERS = {
    # name: (tokenizer.json, EOS token text, EOS id)
    "smollm2": (SHARED / "tokenizers" / "smollm2.json", "<|im_end|>", 2),
    "llama3": (SHARED / "tokenizers" / "llama3_1.json", "<|eot_id|>", 128009),
}


def half_of(name: str) -> str:
    """"A" or "B": the low bit of the first byte of sha256(file name). (Not the digest's
    last bit: the dev split was chosen by `int(sha256) % 100 < 15`, whose parity is the
    digest's parity, which would split it 8:7.)"""
    return "A" if hashlib.sha256(name.encode()).digest()[0] & 1 == 0 else "B"


def maskbench_files(limit: int | None = None) -> list[Path]:
    files = sorted(MASKBENCH.glob("*.json"))
    return files[:limit] if limit else files


def load_case(path: Path, hf_tok):
    """(schema, [(valid, token ids)]) of a MaskBench file: each instance serialized as the
    mask-engine protocol says (compact separators, no ASCII escaping) and tokenized once,
    without special tokens, by the HF tokenizer; all engines are fed these same ids."""
    d = json.loads(path.read_text())
    tests = []
    for t in d.get("tests", []):
        text = json.dumps(t.get("data"), separators=(",", ":"), ensure_ascii=False)
        tests.append((bool(t.get("valid", True)), hf_tok.encode(text, add_special_tokens=False)))
    return d["schema"], tests


def hf_tokenizer(name: str):
    import transformers

    path, eos_text, eos = TOKENIZERS[name]
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=eos_text)
    return tok, eos


def pct(xs, p: float) -> float:
    """Nearest-rank percentile of a sorted list (NaN when empty)."""
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("formwork", "llguidance", "xgrammar", "torch", "transformers", "tokenizers", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def fmt_us(x: float) -> str:
    if x != x:
        return "-"
    if x >= 1000:
        return f"{x / 1000:.2f} ms"
    if x >= 100:
        return f"{x:.0f} µs"
    if x >= 10:
        return f"{x:.1f} µs"
    return f"{x:.2f} µs"
