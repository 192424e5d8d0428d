"""formwork: constrained generation for Python.

Output that is guaranteed to match a JSON Schema, a GBNF grammar or a regular expression,
as per-token bitmasks over a model's real vocabulary. The API follows XGrammar and
llguidance::

    import formwork
    info = formwork.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    compiler = formwork.GrammarCompiler(info)
    compiled = compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    matcher = formwork.Matcher(compiled)
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)        # token t: word t >> 5, bit t & 31
    formwork.apply_token_bitmask_inplace(logits, bitmask)  # disallowed logits -> -inf
    matcher.accept_token(next_token)

`formwork.hf.LogitsProcessor` does this inside transformers' `model.generate(...)`;
`formwork.vllm` inside vLLM (a logits processor loaded by name, and a structured-output
backend); `formwork.sglang` is SGLang's `--grammar-backend formwork`.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ._formwork import (
    CompiledGrammar,
    FormworkError,
    Grammar,
    Matcher,
    TokenizerInfo,
    __version__,
    batch_fill_next_token_bitmask,
)
from ._formwork import GrammarCompiler as _GrammarCompiler
from ._formwork import apply_token_bitmask_inplace_f32 as _apply_f32

__all__ = [
    "CompiledGrammar",
    "FormworkError",
    "Grammar",
    "GrammarCompiler",
    "Matcher",
    "TokenizerInfo",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "batch_fill_next_token_bitmask",
    "bitmask_size",
    "__version__",
]


class GrammarCompiler(_GrammarCompiler):
    """Compiles grammars for one tokenizer, caching them by grammar (an equal grammar
    compiled again gives the same `CompiledGrammar`, with its warm mask caches)."""

    def compile_json_schema(self, schema: Any, **options: Any) -> CompiledGrammar:
        """`compile(Grammar.from_json_schema(schema, **options))`."""
        return self.compile(Grammar.from_json_schema(schema, **options))

    def compile_gbnf(self, text: str) -> CompiledGrammar:
        """`compile(Grammar.from_gbnf(text))`."""
        return self.compile(Grammar.from_gbnf(text))

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        """`compile(Grammar.from_regex(pattern))`."""
        return self.compile(Grammar.from_regex(pattern))

    def compile_builtin_json_grammar(self, **options: Any) -> CompiledGrammar:
        """`compile(Grammar.json(**options))`: any JSON value."""
        return self.compile(Grammar.json(**options))


def bitmask_size(vocab_size: int) -> int:
    """Int32 words per bitmask row: `ceil(vocab_size / 32)`."""
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch_size: int, vocab_size: int, *, backend: Optional[str] = None):
    """An int32 bitmask of shape `(batch_size, ceil(vocab_size / 32))`, every token allowed
    (all bits set, as XGrammar allocates it). A torch CPU tensor when torch is installed
    (or `backend="torch"`), else (or with `backend="numpy"`) a numpy array."""
    shape = (batch_size, bitmask_size(vocab_size))
    if backend in (None, "torch"):
        try:
            import torch

            return torch.full(shape, -1, dtype=torch.int32)
        except ImportError:
            if backend == "torch":
                raise
    if backend not in (None, "numpy"):
        raise ValueError('backend must be "torch", "numpy" or None')
    import numpy as np

    return np.full(shape, -1, dtype=np.int32)


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[Sequence[int]] = None,
) -> None:
    """Sets `logits[i, j] = -inf` wherever bit `j` of `bitmask[i]` is 0 (XGrammar's
    semantics): for `j < vocab_size` (default `min(logits.shape[-1], 32 * bitmask.shape[-1])`;
    logits past it are left as they are), and for the rows in `indices` (default: all).

    float32 logits (numpy, or torch on the CPU with contiguous rows) take formwork's kernel,
    with the GIL released; other torch dtypes and devices take torch operations."""
    idx: Optional[List[int]] = None
    if indices is not None:
        idx = indices.tolist() if hasattr(indices, "tolist") else [int(i) for i in indices]
    if _is_torch(logits):
        import torch

        fast = (
            logits.dtype == torch.float32
            and logits.device.type == "cpu"
            and logits.dim() in (1, 2)
            and logits.stride(-1) == 1
            and _is_torch(bitmask)
            and bitmask.device.type == "cpu"
            and bitmask.is_contiguous()
        )
        if not fast:
            _apply_torch(logits, bitmask, vocab_size, idx)
            return
    _apply_f32(logits, bitmask, vocab_size=vocab_size, indices=idx)


def _apply_torch(logits, bitmask, vocab_size, indices) -> None:
    import torch

    if bitmask.dtype != torch.int32:
        raise TypeError("bitmask must be int32")
    logits2 = logits if logits.dim() == 2 else logits.unsqueeze(0)
    bits2 = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    n = vocab_size if vocab_size is not None else min(logits2.shape[-1], 32 * bits2.shape[-1])
    rows = list(range(logits2.shape[0])) if indices is None else indices
    shifts = torch.arange(32, dtype=torch.int32, device=bits2.device)
    for r in rows:
        allowed = ((bits2[r].unsqueeze(-1) >> shifts) & 1).bool().flatten()[:n]
        logits2[r, :n].masked_fill_(~allowed.to(logits2.device), float("-inf"))
