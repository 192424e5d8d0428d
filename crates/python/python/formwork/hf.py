"""formwork in transformers' `model.generate(...)`: a `LogitsProcessor`.

    from transformers import AutoModelForCausalLM, AutoTokenizer
    import formwork, formwork.hf

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    info = formwork.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    compiled = formwork.GrammarCompiler(info).compile_json_schema(schema)
    proc = formwork.hf.LogitsProcessor(compiled)
    out = model.generate(**inputs, logits_processor=[proc], max_new_tokens=200)

One matcher per batch row (one compiled grammar for all rows, or a list with one per row).
The processor is reusable: a call whose `input_ids` do not continue the previous call's
starts fresh matchers, so the same object can serve many `generate()` calls (or call
`reset()`). Beam search (which reorders rows) is refused with an error. A row whose matcher has accepted a stop token is left unmasked (transformers
pads finished rows). Logits on another device are masked there with torch operations; the
bitmask is computed on the CPU.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import torch
import transformers

from . import (
    CompiledGrammar,
    Matcher,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    batch_fill_next_token_bitmask,
)

__all__ = ["LogitsProcessor"]


class LogitsProcessor(transformers.LogitsProcessor):
    """Constrains every row of a `generate()` batch to a compiled grammar."""

    def __init__(self, compiled_grammar: Union[CompiledGrammar, Sequence[CompiledGrammar]]):
        if isinstance(compiled_grammar, CompiledGrammar):
            self._grammars: List[CompiledGrammar] = [compiled_grammar]
        else:
            self._grammars = list(compiled_grammar)
            if not self._grammars:
                raise ValueError("give at least one compiled grammar")
        sizes = {g.tokenizer_info.vocab_size for g in self._grammars}
        if len(sizes) != 1:
            raise ValueError("the compiled grammars are for tokenizers of different vocab_size")
        self.vocab_size = sizes.pop()
        self.matchers: List[Matcher] = []
        self._bitmask: Optional[torch.Tensor] = None
        self._last: Optional[torch.Tensor] = None
        self._last_input: Optional[torch.Tensor] = None
        self._prompt: Optional[torch.Tensor] = None

    def reset(self) -> None:
        """Forget the current generation: the next call starts fresh matchers."""
        self.matchers = []
        self._last = None

    def _start(self, batch: int) -> None:
        if len(self._grammars) == 1:
            grammars = self._grammars * batch
        elif len(self._grammars) == batch:
            grammars = self._grammars
        else:
            raise ValueError(f"{len(self._grammars)} compiled grammars for a batch of {batch} rows")
        self.matchers = [Matcher(g) for g in grammars]
        self._prompt = self._last_input
        self._bitmask = allocate_token_bitmask(batch, self.vocab_size, backend="torch")

    def _continues(self, input_ids: torch.Tensor) -> bool:
        """Does this call continue the last one (one more token per row)? A different length
        or batch is a new `generate()` call. The same prompts with other continuations mean
        the rows were reordered (beam search), which one matcher per row cannot follow."""
        last = self._last
        if last is None or len(self.matchers) != input_ids.shape[0] or input_ids.shape[1] != last.shape[1] + 1:
            return False
        prefix = input_ids[:, :-1].cpu()
        if torch.equal(prefix, last):
            return True
        if last.shape[1] > self._prompt.shape[1] and torch.equal(prefix[:, : self._prompt.shape[1]], self._prompt):
            raise RuntimeError(
                "the rows changed between steps (beam search reorders them): formwork.hf keeps one "
                "matcher per row and supports greedy and sampled generation; call reset() before "
                "reusing the processor for an unrelated call of this shape"
            )
        return False

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = input_ids.shape[0]
        self._last_input = input_ids.detach().cpu()
        if scores.shape[-1] > self.vocab_size:
            raise ValueError(
                f"the logits have {scores.shape[-1]} columns but the tokenizer info's vocab_size is "
                f"{self.vocab_size}: build it with TokenizerInfo.from_huggingface(tokenizer, "
                "vocab_size=model.config.vocab_size)"
            )
        if self._continues(input_ids):
            sampled = input_ids[:, -1].tolist()
            for i, (m, t) in enumerate(zip(self.matchers, sampled)):
                if m.is_terminated():
                    continue  # a finished row: transformers appends padding
                if not m.accept_token(t):
                    raise RuntimeError(
                        f"row {i}: token {t} was generated but the grammar does not allow it "
                        "(was another logits processor or a forced token applied after formwork's?)"
                    )
        else:
            self._start(batch)
        self._last = self._last_input

        live = [i for i, m in enumerate(self.matchers) if not m.is_terminated()]
        bitmask = self._bitmask
        assert bitmask is not None
        bitmask.fill_(-1)  # finished rows stay unmasked
        batch_fill_next_token_bitmask([self.matchers[i] for i in live], bitmask, live)
        if scores.device.type == "cpu":
            apply_token_bitmask_inplace(scores, bitmask, indices=live)
        else:
            apply_token_bitmask_inplace(scores, bitmask.to(scores.device), indices=live)
        return scores
