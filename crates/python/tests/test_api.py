"""The Python API on the real SmolLM2 vocabulary: tokenizer sources, grammar front ends,
refusals, the matcher's operations, and the bitmask kernels (numpy and torch)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import formwork
from conftest import GGUF, SMOLLM2_JSON

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def allowed(bitmask: np.ndarray, row: int, n: int) -> set:
    return {t for t in range(n) if (int(bitmask[row, t >> 5]) >> (t & 31)) & 1}


def test_tokenizer_sources_agree(smollm2_info):
    info = smollm2_info
    assert info.vocab_size == info.tokenizer_vocab_size == 49152
    assert info.stop_token_ids == [2]
    assert info.token_bytes(2) == b"<|im_end|>"
    assert 2 in info.special_token_ids
    # Found by name when not given: <|im_end|> first.
    default = formwork.TokenizerInfo.from_tokenizer_json(str(SMOLLM2_JSON))
    assert default.stop_token_ids[0] == 2
    # The GGUF's metadata gives the same bytes for every token (the shared tokenizer.json
    # was rebuilt from it).
    g = formwork.TokenizerInfo.from_gguf(str(GGUF))
    assert g.tokenizer_vocab_size == info.tokenizer_vocab_size
    assert 2 in g.stop_token_ids
    assert all(g.token_bytes(t) == info.token_bytes(t) for t in range(0, 49152, 7))
    # A wider logit row than the tokenizer.
    wide = formwork.TokenizerInfo.from_tokenizer_json(str(SMOLLM2_JSON), vocab_size=49216)
    assert (wide.vocab_size, wide.tokenizer_vocab_size) == (49216, 49152)
    with pytest.raises(formwork.FormworkError, match="smaller than"):
        formwork.TokenizerInfo.from_tokenizer_json(str(SMOLLM2_JSON), vocab_size=10)
    with pytest.raises(formwork.FormworkError):
        formwork.TokenizerInfo.from_tokenizer_json(str(SMOLLM2_JSON), stop_token_ids=[10**6])
    with pytest.raises(formwork.FormworkError):
        formwork.TokenizerInfo.from_gguf(str(SMOLLM2_JSON))


def test_from_huggingface_matches_tokenizer_json(smollm2_info):
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(SMOLLM2_JSON), eos_token="<|im_end|>")
    info = formwork.TokenizerInfo.from_huggingface(tok)
    assert info.stop_token_ids == [2]
    assert info.vocab_size == 49152
    assert all(info.token_bytes(t) == smollm2_info.token_bytes(t) for t in range(49152))
    assert formwork.TokenizerInfo.from_huggingface(tok, vocab_size=49280).vocab_size == 49280


def test_grammar_front_ends_and_refusals():
    g = formwork.Grammar.from_json_schema(PERSON)
    assert "root ::=" in str(g)
    # Text, dict and a pydantic-like class give the same grammar text.
    assert str(formwork.Grammar.from_json_schema(json.dumps(PERSON))) == str(g)

    class Model:
        @staticmethod
        def model_json_schema():
            return PERSON

    assert str(formwork.Grammar.from_json_schema(Model)) == str(g)
    assert str(formwork.Grammar.from_json_schema(PERSON, whitespace="compact")) != str(g)
    pretty = str(formwork.Grammar.from_json_schema(PERSON, whitespace="pretty"))
    assert '",\\n  "' in pretty and '": "' in pretty, pretty

    with pytest.raises(formwork.FormworkError) as e:
        formwork.Grammar.from_json_schema({"type": "object", "properties": {"a": {"unevaluatedItems": False}}})
    assert e.value.keyword == "unevaluatedItems"
    assert e.value.pointer == "/properties/a/unevaluatedItems"
    assert "unevaluatedItems" in str(e.value)
    lenient = formwork.Grammar.from_json_schema({"type": "array", "uniqueItems": True, "items": {"type": "string"}}, lenient=True)
    assert lenient.warnings and "uniqueItems" in lenient.warnings[0]
    with pytest.raises(formwork.FormworkError, match="not valid JSON"):
        formwork.Grammar.from_json_schema("{")
    with pytest.raises(ValueError):
        formwork.Grammar.from_json_schema(PERSON, key_order="sorted")

    assert str(formwork.Grammar.from_gbnf('root ::= "yes" | "no"')) == 'root ::= "yes" | "no"\n'
    with pytest.raises(formwork.FormworkError, match="undefined rule `valu`"):
        formwork.Grammar.from_gbnf("root ::= valu")
    formwork.Grammar.from_regex(r"[0-9]{3}-[a-z]+")
    with pytest.raises(formwork.FormworkError, match="word boundaries"):
        formwork.Grammar.from_regex(r"a\bb")
    formwork.Grammar.json()


def test_compiler_caches_by_grammar(smollm2_info):
    c = formwork.GrammarCompiler(smollm2_info, cache_size=2)
    a = c.compile_json_schema(PERSON)
    assert c.compile(formwork.Grammar.from_json_schema(PERSON)) == a
    assert c.compile_gbnf('root ::= "x"') != a
    assert c.cache_len == 2
    assert a.tokenizer_info.vocab_size == 49152
    with pytest.raises(formwork.FormworkError, match="left-recursive"):
        c.compile_gbnf('root ::= root "a" | "a"')


# Definitions reached through `$ref`: compiled when a matcher first reaches them.
FLEET = {
    "$defs": {
        "wheel": {"type": "object", "properties": {"size": {"type": "integer"}, "brand": {"type": "string", "format": "tyre-brand"}}, "required": ["size"]},
        "car": {"type": "object", "properties": {"wheels": {"type": "array", "items": {"$ref": "#/$defs/wheel"}}, "spare": {"$ref": "#/$defs/wheel"}}},
        "boat": {"type": "object", "properties": {"hulls": {"enum": [1, 2, 3]}}, "required": ["hulls"]},
    },
    "type": "object",
    "properties": {"cars": {"type": "array", "items": {"$ref": "#/$defs/car"}}, "boat": {"$ref": "#/$defs/boat"}},
}


def test_schema_definitions_are_compiled_when_reached(smollm2_info):
    g = formwork.Grammar.from_json_schema(FLEET, key_order="any")
    # The warning of a definition no matcher reached yet is said up front.
    assert any("tyre-brand" in w for w in g.warnings), g.warnings
    c = formwork.GrammarCompiler(smollm2_info)
    cg = c.compile(g)
    for doc, ok in [
        ('{"cars":[{"wheels":[{"size":17},{"brand":"x","size":18}],"spare":{"size":16}}],"boat":{"hulls":2}}', True),
        ('{"boat":{"hulls":2},"cars":[]}', True),
        ('{"cars":[{"wheels":[{"brand":"x"}]}]}', False),  # a wheel needs its size
        ('{"boat":{"hulls":4}}', False),
        ('{"cars":[{"spare":{"size":"16"}}]}', False),
    ]:
        m = formwork.Matcher(cg)
        assert (m.accept_string(doc) and m.is_accepting()) == ok, doc
    # The same schema compiles to the same grammar (cached by its text and options), and
    # printing it compiles the whole grammar.
    assert c.compile(formwork.Grammar.from_json_schema(FLEET, key_order="any")) == cg
    assert c.compile(formwork.Grammar.from_json_schema(FLEET)) != cg
    assert "root ::=" in str(g)
    with pytest.raises(formwork.FormworkError, match="pattern"):
        formwork.Grammar.from_json_schema({"$defs": {"d": {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?=a)"}}}}, "type": "object", "properties": {"d": {"$ref": "#/$defs/d"}}})


def walk(m: formwork.Matcher, tokens, bitmask, info):
    """At each position the next token is in the mask; EOS only where accepting."""
    for t in tokens:
        m.fill_next_token_bitmask(bitmask, 0)
        ok = allowed(bitmask, 0, info.vocab_size)
        assert t in ok
        assert (2 in ok) == m.is_accepting()
        assert m.accept_token(t)


def test_matcher_operations(smollm2_info, smollm2_tokenizers):
    info = smollm2_info
    c = formwork.GrammarCompiler(info)
    cg = c.compile_json_schema(PERSON, whitespace="compact")
    doc = '{"name":"Ada","age":36}'
    toks = smollm2_tokenizers.encode(doc, add_special_tokens=False).ids
    m = formwork.Matcher(cg)
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    assert bitmask.shape == (1, 1536) and bitmask.dtype == np.int32 and (bitmask == -1).all()
    walk(m, toks, bitmask, info)
    assert m.is_accepting() and not m.is_terminated()
    assert m.num_accepted == len(toks)
    m.fill_next_token_bitmask(bitmask)
    assert allowed(bitmask, 0, info.vocab_size) == {2}, "only the stop token after a complete document"
    assert not m.accept_token(0), "<|endoftext|> is not a stop token of this info"
    assert m.accept_token(2) and m.is_terminated()
    m.fill_next_token_bitmask(bitmask)
    assert not bitmask.any()
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()

    # validate_tokens: the longest accepted prefix, state unchanged.
    m.reset()
    assert m.num_accepted == 0
    bad = smollm2_tokenizers.encode('{"name":"Ada","age":"x"}', add_special_tokens=False).ids
    n = m.validate_tokens(bad)
    assert 0 < n < len(bad) and m.num_accepted == 0
    assert not m.accept_tokens(bad) and m.num_accepted == 0, "all or nothing"
    assert m.accept_tokens(toks[:3]) and m.num_accepted == 3
    with pytest.raises(formwork.FormworkError, match="roll back 4"):
        m.rollback(4)

    # fork: independent copies; rollback restores masks bit for bit.
    m.reset()
    m.accept_tokens(toks[:2])
    f = m.fork()
    before = bitmask.copy()
    m.fill_next_token_bitmask(before)
    assert f.accept_tokens(toks[2:])
    after = bitmask.copy()
    m.fill_next_token_bitmask(after)
    assert (before == after).all()
    f.rollback(len(toks) - 2)
    f.fill_next_token_bitmask(after)
    assert (before == after).all()

    # Forced text: after `{` the key `"name"` is the only way on (compact whitespace).
    m.reset()
    assert m.forced_bytes() == b'{"name":"'
    assert m.find_jump_forward_string() == '{"name":"'
    forced = m.forced_tokens()
    spelled = b"".join(info.token_bytes(t) for t in forced)
    assert forced and b'{"name":"'.startswith(spelled)
    assert m.accept_tokens(forced)
    assert m.accept_string("Ada") and not m.accept_string('"age"') and m.accept_string(b'","age":7}')
    assert m.is_accepting()

    # terminate_without_stop_token: done when complete and nothing can follow.
    t = formwork.Matcher(c.compile_gbnf('root ::= "yes"'), terminate_without_stop_token=True)
    assert not t.is_terminated()
    assert t.accept_string("yes") and t.is_terminated()


def test_root_whitespace_only_when_asked(smollm2_info, smollm2_tokenizers):
    """A schema grammar ends at its closing brace (generation: no newlines until the token
    limit); `root_whitespace=True` allows whitespace around the value, to check documents."""
    info = smollm2_info
    c = formwork.GrammarCompiler(info)
    doc = '{"name":"Ada","age":36}'
    toks = smollm2_tokenizers.encode(doc, add_special_tokens=False).ids
    newline = smollm2_tokenizers.encode("\n", add_special_tokens=False).ids
    assert len(newline) == 1
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    for root_ws, expect_newline in [(False, False), (True, True)]:
        g = formwork.Grammar.from_json_schema(PERSON, root_whitespace=root_ws)
        m = formwork.Matcher(c.compile(g))
        assert m.accept_tokens(toks)
        m.fill_next_token_bitmask(bitmask)
        ok = allowed(bitmask, 0, info.vocab_size)
        assert 2 in ok
        assert (newline[0] in ok) == expect_newline, (root_ws, sorted(ok)[:10])
    assert formwork.Matcher(c.compile(formwork.Grammar.from_json_schema(PERSON, root_whitespace=True))).accept_tokens(
        smollm2_tokenizers.encode(" " + doc + "\n", add_special_tokens=False).ids
    )
    # The built-in JSON grammar: a trailing run by default (the documented GBNF), none with
    # trailing_whitespace=False (what the SGLang backend asks for its `$$ANY$$` JSON).
    for trailing, expect_newline in [(True, True), (False, False)]:
        m = formwork.Matcher(c.compile(formwork.Grammar.json(object_only=True, trailing_whitespace=trailing)))
        assert m.accept_tokens(toks)
        m.fill_next_token_bitmask(bitmask)
        ok = allowed(bitmask, 0, info.vocab_size)
        assert 2 in ok
        assert (newline[0] in ok) == expect_newline, (trailing, sorted(ok)[:10])


def test_wider_logit_rows_and_bad_bitmasks(smollm2_info):
    wide = formwork.TokenizerInfo.from_tokenizer_json(str(SMOLLM2_JSON), vocab_size=49216, stop_token_ids=[2])
    m = formwork.Matcher(formwork.GrammarCompiler(wide).compile_builtin_json_grammar())
    b = formwork.allocate_token_bitmask(2, wide.vocab_size, backend="numpy")
    assert b.shape == (2, 1538)
    assert m.fill_next_token_bitmask(b, 1)
    assert (b[0] == -1).all(), "other rows untouched"
    assert not b[1, 1536:].any(), "tokens past the tokenizer are never allowed"
    with pytest.raises(ValueError, match="outside the bitmask"):
        m.fill_next_token_bitmask(b, 2)
    with pytest.raises(ValueError, match="words per row"):
        m.fill_next_token_bitmask(np.zeros((1, 100), np.int32))
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask(np.zeros((1, 1536), np.int64))
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask(np.zeros((1536, 2), np.int32)[:, 0])
    ro = np.zeros((1, 1538), np.int32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(ro)
    # A 1-D bitmask is one row.
    one = np.zeros(1538, np.int32)
    m.fill_next_token_bitmask(one)
    assert (one == b[1]).all()


def test_torch_tensors_batch_and_threads(smollm2_info, smollm2_tokenizers):
    torch = pytest.importorskip("torch")
    info = smollm2_info
    c = formwork.GrammarCompiler(info)
    cg = c.compile_json_schema(PERSON)
    docs = ['{"name": "Ada", "age": 36}', '{"name": "Bo", "age": 1}', '{ "name" : "Cy"', '{']
    matchers = []
    for d in docs:
        m = formwork.Matcher(cg)
        assert m.accept_tokens(smollm2_tokenizers.encode(d, add_special_tokens=False).ids)
        matchers.append(m)
    single = formwork.allocate_token_bitmask(len(docs), info.vocab_size)
    assert isinstance(single, torch.Tensor) and single.dtype == torch.int32
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(single, i)
    batch = formwork.allocate_token_bitmask(len(docs) + 2, info.vocab_size)
    needs = formwork.batch_fill_next_token_bitmask(matchers[::-1], batch, [5, 4, 3, 2])
    assert needs == [True] * 4
    assert torch.equal(batch[2:], single)
    assert (batch[:2] == -1).all()
    with pytest.raises(ValueError, match="twice"):
        formwork.batch_fill_next_token_bitmask(matchers[:2], batch, [1, 1])
    with pytest.raises(ValueError, match="twice"):
        formwork.batch_fill_next_token_bitmask([matchers[0], matchers[0]], batch, [0, 1])
    with pytest.raises(TypeError):
        formwork.batch_fill_next_token_bitmask(matchers, batch.t())

    # Several Python threads filling their own rows at once (the GIL is released).
    out = formwork.allocate_token_bitmask(len(docs), info.vocab_size)
    forks = [m.fork() for m in matchers]

    def work(i):
        for _ in range(50):
            forks[i].fill_next_token_bitmask(out, i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(docs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.equal(out, single)


def test_apply_token_bitmask_inplace(smollm2_info):
    torch = pytest.importorskip("torch")
    n = 100
    rng = np.random.default_rng(0)
    bitmask = rng.integers(-(2**31), 2**31, size=(3, 4), dtype=np.int64).astype(np.int32)
    logits = rng.standard_normal((3, n)).astype(np.float32)
    want = logits.copy()
    for r in range(3):
        for j in range(n):
            if not (int(bitmask[r, j >> 5]) >> (j & 31)) & 1:
                want[r, j] = -np.inf
    got = logits.copy()
    formwork.apply_token_bitmask_inplace(got, bitmask)
    assert np.array_equal(got, want)
    # torch float32 (formwork's kernel), torch bfloat16 (torch ops), indices, vocab_size.
    t = torch.from_numpy(logits.copy())
    formwork.apply_token_bitmask_inplace(t, torch.from_numpy(bitmask))
    assert np.array_equal(t.numpy(), want)
    h = torch.from_numpy(logits.copy()).to(torch.bfloat16)
    formwork.apply_token_bitmask_inplace(h, torch.from_numpy(bitmask))
    assert torch.equal(torch.isinf(h), torch.from_numpy(np.isinf(want)))
    part = logits.copy()
    formwork.apply_token_bitmask_inplace(part, bitmask, indices=[1], vocab_size=40)
    assert np.array_equal(part[0], logits[0]) and np.array_equal(part[2], logits[2])
    assert np.array_equal(part[1, :40], want[1, :40]) and np.array_equal(part[1, 40:], logits[1, 40:])
