"""formwork as an SGLang grammar backend: `--grammar-backend formwork`.

SGLang keeps a registry of custom grammar backends (`register_grammar_backend` in
`sglang.srt.constrained.base_grammar_backend`), consulted before its built-in ones, and the
`--grammar-backend` flag takes its names from a list that `add_grammar_backend_choices`
extends. `register()` does both. It runs by itself: the formwork wheel declares it as an
SGLang general plugin (entry point group `sglang.srt.plugins`), which SGLang loads in every
process (the launcher before it parses flags, the scheduler before it builds the backend),
so with formwork installed next to SGLang::

    sglang serve --model-path MODEL --grammar-backend formwork

(or `python -m sglang.launch_server ... --grammar-backend formwork`). JSON schemas
(`response_format`, `json_schema`), regexes and EBNF grammars (GBNF) then compile with
formwork; structural tags are refused (the request fails with the reason, as SGLang does
for a grammar a backend cannot take). `--constrained-json-disable-any-whitespace` gives
compact JSON. Without the plugin (SGLANG_PLUGINS excluding it), call
`formwork.sglang.register()` in the process before SGLang parses its flags.

`FormworkGrammarBackend` compiles (SGLang caches one grammar object per key and `copy()`s
it per request: a fresh `Matcher` on the shared compiled grammar); `FormworkGrammar` is
one request's matcher, driven by SGLang's scheduler: `fill_vocab_mask_batched` fills every
constrained row of the batch's bitmask in parallel (XGrammar's layout: int32, token t at
word t>>5, bit t&31), `accept_token` raises ValueError on a token the grammar refuses (the
scheduler aborts that request), `rollback` for speculative decoding, `try_jump_forward`
from the forced bytes. The mask is applied with formwork's kernel on the CPU and SGLang's
own (its Triton kernel, or XGrammar's) on a GPU.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, List, Optional, Tuple

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarRow,
    InvalidGrammarObject,
    register_grammar_backend,
)

from . import (
    CompiledGrammar,
    FormworkError,
    Grammar,
    GrammarCompiler,
    Matcher,
    TokenizerInfo,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    batch_fill_next_token_bitmask,
)

__all__ = ["BACKEND_NAME", "FormworkGrammar", "FormworkGrammarBackend", "register"]

logger = logging.getLogger(__name__)

#: The name `--grammar-backend` takes.
BACKEND_NAME = "formwork"


class FormworkGrammar(BaseGrammarObject):
    """One request's position in a compiled grammar, as SGLang's scheduler drives it."""

    def __init__(self, compiled: CompiledGrammar, key_string: str = ""):
        super().__init__()
        self.compiled = compiled
        self.matcher = Matcher(compiled)
        self.vocab_size = compiled.tokenizer_info.vocab_size
        self.key_string = key_string

    def accept_token(self, token: int) -> None:
        if self.matcher.is_terminated():
            return
        self.current_token = token
        if not self.matcher.accept_token(token):
            raise ValueError(f"formwork: token {token} is not allowed by the grammar here (after {self.matcher.num_accepted} tokens; grammar {self.key_string[:200]!r})")

    def rollback(self, k: int) -> None:
        if k > 0:
            self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device) -> torch.Tensor:
        # On the CPU (formwork writes CPU memory); move_vocab_mask takes it to the device.
        return allocate_token_bitmask(batch_size, max(vocab_size, self.vocab_size), backend="torch")

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: List[GrammarRow], vocab_mask: torch.Tensor) -> None:
        """All rows at once, in parallel with the GIL released, when every entry is a
        formwork grammar; rows not listed are left as they are."""
        if entries and all(isinstance(e.grammar, FormworkGrammar) for e in entries):
            batch_fill_next_token_bitmask([e.grammar.matcher for e in entries], vocab_mask, [e.row for e in entries])
        else:
            BaseGrammarObject.fill_vocab_mask_batched(entries, vocab_mask)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        if logits.device.type == "cpu":
            apply_token_bitmask_inplace(logits, vocab_mask.cpu())
            return
        try:  # SGLang's own Triton kernel, as its XGrammar backend uses on GPUs
            from sglang.kernels.ops.grammar.bitmask_ops import apply_token_bitmask_inplace_triton

            apply_token_bitmask_inplace_triton(logits, vocab_mask)
        except ImportError:
            apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> "FormworkGrammar":
        """A fresh matcher at the start, sharing the compiled grammar (SGLang caches one
        object per grammar and copies it for each request)."""
        return FormworkGrammar(self.compiled, self.key_string)

    def try_jump_forward(self, tokenizer) -> Optional[Tuple[List[int], str]]:
        s = self.matcher.find_jump_forward_string()
        return ([], s) if s else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        if k < len(old_output_ids):
            self.matcher.rollback(len(old_output_ids) - k)
        if not self.matcher.accept_tokens(list(new_output_ids[k:])):
            raise ValueError(f"formwork: the retokenized output {new_output_ids[k:]} is not allowed by the grammar")

    def __repr__(self) -> str:
        return f"FormworkGrammar({self.key_string[:60]!r}, {self.matcher!r})"


class FormworkGrammarBackend(BaseGrammarBackend):
    """Compiles SGLang's grammar keys (`json`, `regex`, `ebnf`) for one tokenizer."""

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        eos_token_ids: Optional[Iterable[int]] = None,
        *,
        any_whitespace: bool = True,
    ):
        super().__init__()
        if not hasattr(tokenizer, "backend_tokenizer"):
            raise ValueError(f"the formwork grammar backend needs a Hugging Face fast tokenizer; got {type(tokenizer).__name__}")
        stops = sorted({int(t) for t in eos_token_ids}) if eos_token_ids else None
        if not stops and getattr(tokenizer, "eos_token_id", None) is not None:
            stops = [int(tokenizer.eos_token_id)]
        info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=max(int(vocab_size), len(tokenizer)), stop_token_ids=stops)
        self.compiler = GrammarCompiler(info)
        self.whitespace = None if any_whitespace else "compact"

    def _compile(self, kind: str, key_string: str, build) -> BaseGrammarObject:
        try:
            return FormworkGrammar(self.compiler.compile(build()), key_string)
        except (FormworkError, ValueError, TypeError) as e:
            logger.error("formwork: invalid %s %r: %s", kind, key_string[:200], e)
            return InvalidGrammarObject(str(e))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == "$$ANY$$":  # SGLang's key for "any JSON value"
            return self._compile("json", key_string, lambda: Grammar.json(trailing_whitespace=False))
        return self._compile("json", key_string, lambda: Grammar.from_json_schema(key_string, whitespace=self.whitespace))

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, lambda: Grammar.from_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._compile("ebnf", key_string, lambda: Grammar.from_gbnf(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return InvalidGrammarObject("the formwork grammar backend does not support structural tags")


def _create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[set] = None) -> FormworkGrammarBackend:
    """The factory SGLang's registry calls: `(server_args, tokenizer, vocab_size, eos_token_ids)`."""
    compact = False
    try:
        from sglang.srt.runtime_context import get_serving

        compact = bool(get_serving().constrained_json_disable_any_whitespace)
    except Exception:  # older layouts keep it on server_args
        compact = bool(getattr(server_args, "constrained_json_disable_any_whitespace", False))
    return FormworkGrammarBackend(tokenizer, vocab_size, eos_token_ids, any_whitespace=not compact)


def register() -> None:
    """Registers the backend under `formwork` and adds the name to `--grammar-backend`'s
    choices. Idempotent. (The SGLang plugin entry point.)"""
    register_grammar_backend(BACKEND_NAME, _create_backend)
    try:
        from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    except ImportError:  # older SGLang: the list lives in server_args
        from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
