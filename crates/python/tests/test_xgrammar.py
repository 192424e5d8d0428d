"""The bitmask layout, bit for bit, against XGrammar's own code (the pip package `xgrammar`).

1. formwork fills masks along a real document; XGrammar's `apply_token_bitmask_inplace`
   applied to them masks exactly the tokens formwork's matcher disallows (checked token by
   token with `is_token_allowed`), and formwork's kernel writes the same logits.
2. On a grammar both engines read the same way, XGrammar's own matcher fills the same bits
   as formwork's, at every step of a document."""

from __future__ import annotations

import numpy as np
import pytest

import formwork
from conftest import SMOLLM2_JSON

xgr = pytest.importorskip("xgrammar")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "bc"]}}},
    "required": ["city", "tags"],
    "additionalProperties": False,
}
DOC = '{"city": "Zürich", "tags": ["a", "bc"]}'


@pytest.fixture(scope="module")
def hf_tokenizer():
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(SMOLLM2_JSON), eos_token="<|im_end|>")


def test_xgrammar_applies_formworks_bitmask_as_formwork_means_it(hf_tokenizer):
    info = formwork.TokenizerInfo.from_huggingface(hf_tokenizer)
    n = info.vocab_size
    m = formwork.Matcher(formwork.GrammarCompiler(info).compile_json_schema(SCHEMA))
    tokens = hf_tokenizer.encode(DOC, add_special_tokens=False)
    positions = [0, 1, 3, len(tokens) // 2, len(tokens) - 1, len(tokens)]
    bitmask = xgr.allocate_token_bitmask(len(positions), n)
    assert bitmask.shape == formwork.allocate_token_bitmask(len(positions), n).shape
    expected = []
    done = 0
    for row, p in enumerate(positions):
        assert m.accept_tokens(tokens[done:p])
        done = p
        m.fill_next_token_bitmask(bitmask, row)
        expected.append({t for t in range(n) if m.is_token_allowed(t)})
    assert 2 in expected[-1] and all(2 not in e for e in expected[:-1]), "EOS exactly where complete"
    logits = torch.randn(len(positions), n, generator=torch.Generator().manual_seed(0))
    theirs = logits.clone()
    xgr.apply_token_bitmask_inplace(theirs, bitmask)
    ours = logits.clone()
    formwork.apply_token_bitmask_inplace(ours, bitmask)
    assert torch.equal(ours, theirs)
    for row, allowed in enumerate(expected):
        kept = set(torch.nonzero(torch.isfinite(theirs[row])).flatten().tolist())
        assert kept == allowed, f"row {row}: XGrammar keeps {len(kept)} tokens, formwork allows {len(allowed)}"
        assert torch.equal(theirs[row][list(allowed)], logits[row][list(allowed)])
    # The numpy path of formwork's kernel too.
    arr = logits.numpy().copy()
    formwork.apply_token_bitmask_inplace(arr, bitmask.numpy())
    assert np.array_equal(arr, theirs.numpy())


@pytest.mark.parametrize(
    "gbnf, doc",
    [
        ('root ::= "answer: " ("yes" | "no" | "maybe") "."', "answer: maybe."),
        ('root ::= [0-9]{1,3} ("," [0-9]{1,3})*', "12,345,6,78"),
        ('root ::= "{" [a-z ]* "}"', "{hello world}"),
    ],
)
def test_xgrammars_own_matcher_fills_the_same_bits(hf_tokenizer, gbnf, doc):
    info = formwork.TokenizerInfo.from_huggingface(hf_tokenizer)
    ours = formwork.Matcher(formwork.GrammarCompiler(info).compile_gbnf(gbnf))
    xinfo = xgr.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=info.vocab_size, stop_token_ids=[2])
    theirs = xgr.GrammarMatcher(xgr.GrammarCompiler(xinfo).compile_grammar(gbnf))
    a = formwork.allocate_token_bitmask(1, info.vocab_size)
    b = xgr.allocate_token_bitmask(1, info.vocab_size)
    tokens = hf_tokenizer.encode(doc, add_special_tokens=False) + [2]
    for step, t in enumerate(tokens):
        ours.fill_next_token_bitmask(a)
        theirs.fill_next_token_bitmask(b)
        if not torch.equal(a, b):
            diff = (a ^ b)[0]
            words = torch.nonzero(diff).flatten().tolist()
            toks = [w * 32 + k for w in words for k in range(32) if (int(diff[w]) >> k) & 1]
            pytest.fail(f"step {step}: masks differ on tokens {[hf_tokenizer.convert_ids_to_tokens(x) for x in toks[:20]]}")
        assert ours.accept_token(t) and theirs.accept_token(t)
    assert ours.is_terminated() and theirs.is_terminated()
