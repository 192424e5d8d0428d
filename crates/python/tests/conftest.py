"""Shared fixtures: the shared SmolLM2 tokenizer, the formwork CLI, and the default model
for transformers (converted once from the GGUF and cached)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("FORMWORK_SHARED_DATA", ROOT.parent / "shared" / "data"))
SMOLLM2_JSON = SHARED / "tokenizers" / "smollm2.json"
FORMWORK_HOME = Path(os.environ.get("FORMWORK_HOME", Path.home() / ".cache" / "formwork"))
GGUF = FORMWORK_HOME / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
# The GGUF dequantized by transformers, saved as safetensors: converting takes ~20 s, loading
# the result ~1 s.
HF_CACHE = FORMWORK_HOME / "hf" / "SmolLM2-135M-Instruct-from-Q4_1"


def formwork_bin() -> Path:
    b = Path(os.environ.get("FORMWORK_BIN", ROOT / "target" / "release" / "formwork"))
    if not b.exists():
        raise RuntimeError(f"{b} not found: build it with `cargo build --release -p formwork-cli` or set FORMWORK_BIN")
    return b


@pytest.fixture(scope="session")
def cli():
    """Runs `formwork ARGS...` with `stdin`; returns the CompletedProcess."""
    b = formwork_bin()

    def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run([str(b), *args], input=stdin, capture_output=True, timeout=120)

    return run


@pytest.fixture(scope="session")
def smollm2_info():
    import formwork

    return formwork.TokenizerInfo.from_tokenizer_json(str(SMOLLM2_JSON), stop_token_ids=[2])


@pytest.fixture(scope="session")
def smollm2_tokenizers():
    """The `tokenizers` library's own tokenizer for the shared smollm2.json."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(SMOLLM2_JSON))


def _convert_gguf() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not GGUF.exists():
        raise RuntimeError(f"{GGUF} is missing: run `./target/release/formwork pull smollm2`")
    tok = AutoTokenizer.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name, dtype=torch.float32)
    # A model loaded from GGUF refuses save_pretrained; its dequantized weights go into a
    # plain model of the same config.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict())
    tmp = HF_CACHE.with_name(HF_CACHE.name + ".tmp")
    plain.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    tmp.rename(HF_CACHE)


@pytest.fixture(scope="session")
def hf_model():
    """(tokenizer, model) of SmolLM2-135M-Instruct for transformers, on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (HF_CACHE / "config.json").exists():
        HF_CACHE.parent.mkdir(parents=True, exist_ok=True)
        _convert_gguf()
    # One thread: on the 2-core test machine a second OpenMP thread waits on a busy core
    # (measured: 20 tokens in 1.4 s with one thread, 11-23 s with two while a build ran).
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(HF_CACHE))
    model = AutoModelForCausalLM.from_pretrained(str(HF_CACHE), dtype=torch.float32)
    model.eval()
    return tok, model
