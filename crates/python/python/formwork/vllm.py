"""formwork inside vLLM (the v1 engine): two ways in.

**1. A custom logits processor: no patch.** Load it by name and give each request its
constraint in `SamplingParams.extra_args["formwork"]`::

    from vllm import LLM, SamplingParams
    llm = LLM(model=path, logits_processors=["formwork.vllm:LogitsProcessor"])
    params = SamplingParams(max_tokens=200, extra_args={"formwork": {"json_schema": schema}})
    out = llm.generate(prompt, params)

    vllm serve MODEL --logits-processors formwork.vllm:LogitsProcessor
    # OpenAI client: extra_body={"vllm_xargs": {"formwork": json.dumps({"regex": "[0-9]+"})}}

`extra_args["formwork"]` is a dict (or its JSON text) with exactly one of `json_schema`
(a schema, dict or JSON text), `regex`, `grammar` (GBNF), `choice` (a list of strings) or
`json_object: true`, and optionally `whitespace` (`"flexible"`, `"compact"`, `"unbounded"` or
an int) and, for schemas, `strict` / `lenient` / `key_order` (see `Grammar.from_json_schema`).
Requests without it are left alone. `validate_params` checks the spec (grammar syntax and
schema keywords, no tokenizer needed) when the request arrives, so a bad one is refused
with HTTP 400 instead of failing in the engine. The processor keeps one `Matcher` per
constrained request, keyed by its row in vLLM's persistent batch and moved with it as
`BatchUpdate` says (removed, then added, then moved); before each step it feeds the matcher
the tokens the request produced since, then fills one bitmask for all constrained rows and
masks the logits (formwork's kernel on the CPU, XGrammar's on a GPU). The stop tokens a
matcher allows once the output is complete are the request's own
(`SamplingParams.all_stop_token_ids`). vLLM refuses custom logits processors together with
speculative decoding, so there is no rollback here.

**2. A structured-output backend: `FormworkBackend` / `FormworkGrammar`**, vLLM's
`StructuredOutputBackend` / `StructuredOutputGrammar` (`vllm/v1/structured_output/
backend_types.py`), so that the ordinary `structured_outputs=StructuredOutputsParams(json=...)`
and the OpenAI server's `response_format` run on formwork, with vLLM's scheduler driving
accept / validate / rollback (speculative decoding included) and its own bitmask kernel.
vLLM's backend list is closed (a `Literal` and an if-chain), so selecting it takes a patch
or a fork. The registration itself is one branch in `StructuredOutputManager.grammar_init`
(`vllm/v1/structured_output/__init__.py`)::

    elif backend == "formwork":
        from formwork.vllm import FormworkBackend; self.backend = FormworkBackend(self.vllm_config, tokenizer=self.tokenizer, vocab_size=vocab_size)

and for the name to get that far, `"formwork"` added to `StructuredOutputsBackend` in
`vllm/config/structured_outputs.py` and an `elif backend == "formwork": pass` before the
`else` (the "auto" branch) of `SamplingParams._validate_structured_outputs` in
`vllm/sampling_params.py` (and to the backends `StructuredOutputsConfig`'s validator allows
`disable_any_whitespace` for, to use that). Then `--structured-outputs-config.backend formwork`.
(Lines as of vLLM 0.32.)

Request types: JSON (a schema), JSON_OBJECT (any object), REGEX (Rust regex syntax), GRAMMAR
(GBNF; Lark grammars are refused), CHOICE. STRUCTURAL_TAG is refused with an error.
`structured_outputs_config.disable_any_whitespace` gives compact JSON.

The tokenizer is read from the Hugging Face fast tokenizer vLLM loads (`backend_tokenizer`);
Mistral's own tokenizers are refused.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import LogitsProcessor as _VllmLogitsProcessor
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

from . import (
    CompiledGrammar,
    FormworkError,
    Grammar as _Grammar,
    GrammarCompiler,
    Matcher,
    TokenizerInfo,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    batch_fill_next_token_bitmask,
)

__all__ = ["FormworkBackend", "FormworkGrammar", "LogitsProcessor", "parse_request_spec"]

logger = logging.getLogger(__name__)

#: The key of `SamplingParams.extra_args` the logits processor reads.
EXTRA_ARGS_KEY = "formwork"


class _Compilers:
    """One `GrammarCompiler` per set of stop tokens (a request's EOS plus its own
    `stop_token_ids`), built from one tokenizer; usually a single entry. Thread-safe: vLLM
    compiles grammars on a thread pool."""

    def __init__(self, tokenizer: Any, vocab_size: int, max_entries: int = 8):
        if not hasattr(tokenizer, "backend_tokenizer"):
            raise ValueError(
                "formwork needs a Hugging Face fast tokenizer (one with backend_tokenizer); "
                f"vLLM gave {type(tokenizer).__name__} (Mistral tokenizers are not supported; use tokenizer_mode='hf')"
            )
        self._json = tokenizer.backend_tokenizer.to_str()
        # The logit width: at least the tokenizer's size (added tokens can exceed the
        # model's vocab_size, as vLLM's guidance backend also allows for).
        self.vocab_size = max(int(vocab_size), len(tokenizer))
        eos = getattr(tokenizer, "eos_token_id", None)
        self.default_stops: Tuple[int, ...] = (int(eos),) if eos is not None else ()
        self._by_stops: "OrderedDict[Tuple[int, ...], GrammarCompiler]" = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    def get(self, stop_token_ids: Optional[Iterable[int]] = None) -> GrammarCompiler:
        key = tuple(sorted({int(t) for t in stop_token_ids})) if stop_token_ids else self.default_stops
        with self._lock:
            c = self._by_stops.get(key)
            if c is not None:
                self._by_stops.move_to_end(key)
                return c
        info = TokenizerInfo.from_tokenizer_json_str(self._json, vocab_size=self.vocab_size, stop_token_ids=list(key) or None)
        c = GrammarCompiler(info)
        with self._lock:
            c = self._by_stops.setdefault(key, c)
            while len(self._by_stops) > self._max:
                self._by_stops.popitem(last=False)
        return c


def _choice_grammar(choices: List[str]) -> _Grammar:
    """One of `choices`, exactly, as GBNF (string literals with JSON's escapes, which GBNF
    reads the same way)."""
    if not choices:
        raise ValueError("choice must be a non-empty list of strings")
    alts = " | ".join(json.dumps(str(c), ensure_ascii=False) for c in choices)
    return _Grammar.from_gbnf(f"root ::= {alts}")


def _schema_grammar(schema: Any, whitespace: Any = None, **options: Any) -> _Grammar:
    return _Grammar.from_json_schema(schema, whitespace=whitespace, **options)


def _grammar_for(request_type: StructuredOutputOptions, spec: str, whitespace: Any) -> _Grammar:
    """The grammar of one of vLLM's structured-output request types."""
    if request_type == StructuredOutputOptions.JSON:
        return _schema_grammar(spec, whitespace=whitespace)
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return _schema_grammar({"type": "object"}, whitespace=whitespace)
    if request_type == StructuredOutputOptions.REGEX:
        return _Grammar.from_regex(spec)
    if request_type == StructuredOutputOptions.GRAMMAR:
        try:
            return _Grammar.from_gbnf(spec)
        except FormworkError as e:
            raise ValueError(f"formwork reads GBNF grammars (Lark is not supported): {e}") from e
    if request_type == StructuredOutputOptions.CHOICE:
        choices = json.loads(spec) if isinstance(spec, str) else spec
        return _choice_grammar(list(choices))
    raise ValueError(f"formwork does not support structured-output requests of type {request_type.name}")


@dataclass
class FormworkBackend(StructuredOutputBackend):
    """vLLM's engine-level structured-output backend on formwork: compiles each request's
    grammar (cached by grammar and stop tokens) and allocates the bitmask in XGrammar's
    layout, which vLLM applies with its own kernel."""

    def __post_init__(self) -> None:
        so = getattr(self.vllm_config, "structured_outputs_config", None)
        self.whitespace = "compact" if getattr(so, "disable_any_whitespace", False) else None
        self._compilers = _Compilers(self.tokenizer, self.vocab_size)
        self.vocab_size = self._compilers.vocab_size

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: Optional[set] = None,
    ) -> StructuredOutputGrammar:
        grammar = _grammar_for(request_type, grammar_spec, self.whitespace)
        compiled = self._compilers.get(stop_token_ids).compile(grammar)
        return FormworkGrammar(compiled)

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return allocate_token_bitmask(max_num_seqs, self.vocab_size, backend="torch")

    def destroy(self) -> None:
        self._compilers = None


@dataclass
class FormworkGrammar(StructuredOutputGrammar):
    """One request's matcher, as vLLM's scheduler drives it: `accept_tokens` after each step
    (tokens after the stop token are ignored, as with XGrammar), `validate_tokens` and
    `rollback` for speculative drafts, `fill_bitmask` into its row."""

    compiled: CompiledGrammar
    matcher: Matcher = field(init=False)

    def __post_init__(self) -> None:
        self.matcher = Matcher(self.compiled)

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        m = self.matcher
        for t in tokens:
            if m.is_terminated():
                break
            if not m.accept_token(t):
                logger.error("formwork: request %s: the grammar does not allow token %s here", request_id, t)
                return False
        return True

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        # vLLM pads rejected draft positions with -1: nothing after one counts.
        for i, t in enumerate(tokens):
            if t < 0:
                tokens = tokens[:i]
                break
        return list(tokens[: self.matcher.validate_tokens(list(tokens))])

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()


# ---- the logits processor -------------------------------------------------------------

_SCHEMA_OPTIONS = ("strict", "lenient", "key_order", "formats_as_annotations", "canonical_integers")
_KINDS = ("json_schema", "regex", "grammar", "choice", "json_object")


def parse_request_spec(value: Any) -> _Grammar:
    """The grammar of one request's `extra_args["formwork"]` (a dict or its JSON text);
    raises ValueError naming what is wrong."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise ValueError(f'extra_args["{EXTRA_ARGS_KEY}"] is text but not JSON: {e}') from e
    if not isinstance(value, dict):
        raise ValueError(f'extra_args["{EXTRA_ARGS_KEY}"] must be a dict (or its JSON text), not {type(value).__name__}')
    kinds = [k for k in _KINDS if k in value and value[k] is not None and value[k] is not False]
    unknown = set(value) - set(_KINDS) - set(_SCHEMA_OPTIONS) - {"whitespace"}
    if unknown:
        raise ValueError(f'extra_args["{EXTRA_ARGS_KEY}"]: unknown keys {sorted(unknown)}; expected one of {list(_KINDS)} and options whitespace, {", ".join(_SCHEMA_OPTIONS)}')
    if len(kinds) != 1:
        raise ValueError(f'extra_args["{EXTRA_ARGS_KEY}"] needs exactly one of {list(_KINDS)}, got {kinds or "none"}')
    kind = kinds[0]
    whitespace = value.get("whitespace")
    try:
        if kind == "json_schema":
            opts = {k: value[k] for k in _SCHEMA_OPTIONS if k in value}
            return _schema_grammar(value["json_schema"], whitespace=whitespace, **opts)
        if kind == "json_object":
            return _schema_grammar({"type": "object"}, whitespace=whitespace)
        if kind == "regex":
            return _Grammar.from_regex(value["regex"])
        if kind == "grammar":
            return _Grammar.from_gbnf(value["grammar"])
        return _choice_grammar(list(value["choice"]))
    except FormworkError as e:
        raise ValueError(f'extra_args["{EXTRA_ARGS_KEY}"]["{kind}"]: {e}') from e


@dataclass
class _Row:
    """A constrained request in the persistent batch: its matcher, and how many of its
    output tokens (a live reference to vLLM's list) the matcher has seen. `matcher` is None
    when its grammar failed to compile here; `broken` once a token the grammar refuses was
    produced anyway (another processor overrode the mask). Either way the request can no
    longer be constrained, and a logits processor cannot fail one request alone, so from
    then on only its stop tokens are allowed: it ends at once, never unconstrained."""

    matcher: Optional[Matcher]
    output_ids: List[int]
    stop_token_ids: List[int]
    seen: int = 0
    broken: bool = False

    def catch_up(self, index: int) -> None:
        out = self.output_ids
        while self.seen < len(out) and not self.broken:
            t = out[self.seen]
            if t < 0:
                # With async scheduling vLLM appends -1 for a token still on the GPU and
                # writes the real id in place just before the logits processors run
                # (`update_async_output_token_ids`): `apply` catches up then.
                break
            self.seen += 1
            if self.matcher.is_terminated():
                continue
            if not self.matcher.accept_token(t):
                self.broken = True
                logger.error("formwork: row %d: token %s is not allowed by the request's grammar; ending the request", index, t)


class LogitsProcessor(_VllmLogitsProcessor):
    """A vLLM v1 logits processor constraining each request that carries
    `extra_args["formwork"]` (see the module docs); other requests are untouched."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self._vllm_config = vllm_config
        self._device = torch.device(device)
        self._max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        self._compilers: Optional[_Compilers] = None
        self._rows: Dict[int, _Row] = {}
        self._bitmask: Optional[torch.Tensor] = None

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        extra = sampling_params.extra_args or {}
        if EXTRA_ARGS_KEY in extra:
            parse_request_spec(extra[EXTRA_ARGS_KEY])

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes the argmax

    # The tokenizer is loaded on the first constrained request, so an engine that never
    # sees one pays nothing.
    def _compiler_set(self) -> _Compilers:
        if self._compilers is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            model_config = self._vllm_config.model_config
            tokenizer = cached_tokenizer_from_config(model_config=model_config)
            self._compilers = _Compilers(tokenizer, model_config.get_vocab_size())
        return self._compilers

    def _new_row(self, params: Any, output_ids: List[int]) -> Optional[_Row]:
        extra = getattr(params, "extra_args", None) or {}
        if EXTRA_ARGS_KEY not in extra:
            return None
        compilers = self._compiler_set()
        stops = sorted(getattr(params, "all_stop_token_ids", None) or compilers.default_stops)
        try:
            grammar = parse_request_spec(extra[EXTRA_ARGS_KEY])
            compiled = compilers.get(stops).compile(grammar)
        except (ValueError, FormworkError) as e:  # validate_params let it through
            logger.error("formwork: the request's grammar does not compile (%s); ending the request", e)
            return _Row(None, output_ids, stops, broken=True)
        return _Row(Matcher(compiled), output_ids, stops)

    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        rows = self._rows
        if batch_update is not None:
            for index in batch_update.removed:
                rows.pop(index, None)
            for index, params, _prompt_ids, output_ids in batch_update.added:
                row = self._new_row(params, output_ids)
                if row is None:
                    rows.pop(index, None)
                else:
                    rows[index] = row
            for a, b, direction in batch_update.moved:
                ra, rb = rows.pop(a, None), rows.pop(b, None)
                if ra is not None:
                    rows[b] = ra
                if rb is not None and direction == MoveDirectionality.SWAP:
                    rows[a] = rb
        for index, row in rows.items():
            row.catch_up(index)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        live = []
        for index, row in self._rows.items():
            row.catch_up(index)
            if index >= logits.shape[0]:
                continue
            if row.broken:
                stops = torch.tensor(row.stop_token_ids, dtype=torch.long, device=logits.device)
                kept = logits[index, stops].clone()
                logits[index] = float("-inf")
                logits[index, stops] = kept
            elif not row.matcher.is_terminated():
                live.append(index)
        if not live:
            return logits
        if self._bitmask is None:
            self._bitmask = allocate_token_bitmask(max(self._max_rows, logits.shape[0]), self._compilers.vocab_size, backend="torch")
        bitmask = self._bitmask
        batch_fill_next_token_bitmask([self._rows[i].matcher for i in live], bitmask, live)
        if logits.device.type == "cpu":
            apply_token_bitmask_inplace(logits, bitmask, indices=live)
        else:
            _apply_on_device(logits, bitmask, live)
        return logits


def _apply_on_device(logits: torch.Tensor, bitmask: torch.Tensor, rows: List[int]) -> None:
    """Masks `rows` of device logits: XGrammar's kernel (a vLLM dependency) when it imports,
    else torch operations."""
    device_bits = bitmask[: max(rows) + 1].to(logits.device, non_blocking=True)
    try:
        import xgrammar

        xgrammar.apply_token_bitmask_inplace(logits, device_bits, indices=rows)
        return
    except ImportError:
        pass
    apply_token_bitmask_inplace(logits, device_bits, indices=rows)
