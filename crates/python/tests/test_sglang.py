"""`formwork.sglang` against the real SGLang package (its own base classes, registry, flag
parser, backend factory and batch sampling info), on the CPU with the shared SmolLM2
tokenizer. SGLang's engine itself does not run here (its model runner needs its CUDA
kernels), so the decode loop is SGLang's `SamplingBatchInfo` masking logits and the
scheduler's accept/terminate rule, with random logits in place of a model.

Skipped when SGLang is not installed: run.sh installs it into a second venv only with
FORMWORK_PY_ENGINES=1 (see run.sh)."""

from __future__ import annotations

import json
import re

import pytest

import formwork

sglang = pytest.importorskip("sglang")
torch = pytest.importorskip("torch")
jsonschema = pytest.importorskip("jsonschema")
transformers = pytest.importorskip("transformers")
from sglang.srt.constrained.base_grammar_backend import (  # noqa: E402
    GRAMMAR_BACKEND_REGISTRY,
    BaseGrammarBackend,
    BaseGrammarObject,
    InvalidGrammarObject,
)

import formwork.sglang as fs  # noqa: E402
from conftest import HF_CACHE, SMOLLM2_JSON  # noqa: E402

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
DATE_RE = r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]"
YESNO_EBNF = 'root ::= "Answer: " ("yes" | "no") "."'
EOS = 2  # <|im_end|>


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(SMOLLM2_JSON), eos_token="<|im_end|>")


@pytest.fixture(scope="module")
def backend(tokenizer):
    """The backend as SGLang's factory makes it (compact JSON, as with
    --constrained-json-disable-any-whitespace)."""
    return fs.FormworkGrammarBackend(tokenizer, 49152, {EOS}, any_whitespace=False)


def test_the_adapters_implement_sglangs_own_interfaces():
    assert issubclass(fs.FormworkGrammarBackend, BaseGrammarBackend)
    assert issubclass(fs.FormworkGrammar, BaseGrammarObject)
    # Every method the base leaves unimplemented (raising NotImplementedError) is ours.
    for name in [
        "accept_token", "rollback", "is_terminated", "allocate_vocab_mask", "fill_vocab_mask",
        "fill_vocab_mask_batched", "reset_vocab_mask", "move_vocab_mask", "apply_vocab_mask",
        "copy", "try_jump_forward", "jump_forward_str_state", "jump_and_retokenize",
    ]:
        assert name in vars(fs.FormworkGrammar), name
    for name in ["dispatch_json", "dispatch_regex", "dispatch_ebnf", "dispatch_structural_tag"]:
        assert name in vars(fs.FormworkGrammarBackend), name


def test_register_makes_the_flag_and_sglangs_factory_give_formwork(tokenizer):
    """`--grammar-backend formwork` parses, and SGLang's create_grammar_backend, in a
    scheduler's runtime context built from those flags, returns formwork's backend."""
    fs.register()
    fs.register()  # idempotent
    assert GRAMMAR_BACKEND_REGISTRY["formwork"] is fs._create_backend
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES

    assert GRAMMAR_BACKEND_CHOICES.count("formwork") == 1
    if not (HF_CACHE / "config.json").exists():
        pytest.skip(f"{HF_CACHE} missing (test_hf.py makes it): SGLang's flags need a model path")
    from sglang.srt.server_args import prepare_server_args

    args = prepare_server_args(["--model-path", str(HF_CACHE), "--grammar-backend", "formwork", "--device", "cpu", "--constrained-json-disable-any-whitespace"])
    assert args.grammar_backend == "formwork"
    try:
        from sglang.srt.runtime_context import create_context, use_context
    except ImportError:
        pytest.skip("this SGLang has no runtime_context; the registry was checked above")
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend

    with use_context(create_context(args, role="scheduler")):
        made = create_grammar_backend(args, tokenizer, 49152, {EOS})
    assert isinstance(made, fs.FormworkGrammarBackend)
    assert made.whitespace == "compact"
    assert made.compiler.tokenizer_info.stop_token_ids == [EOS]


def test_the_wheel_declares_the_sglang_plugin():
    """SGLang loads general plugins by entry point in every process; the installed formwork
    declares `register` as one (so no wrapper is needed around `sglang serve`)."""
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="sglang.srt.plugins") if ep.name == "formwork"]
    assert eps and eps[0].value == "formwork.sglang:register", "reinstall the wheel (run.sh builds it)"
    from sglang.srt.plugins import load_plugins_by_group

    loaded = load_plugins_by_group("sglang.srt.plugins")
    assert loaded["formwork"][0] is fs.register


def compile_key(backend, key):
    """As SGLang's GrammarManager does: a future on a cache miss, then the cache, then a
    copy per request."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result(timeout=60)
        if not isinstance(value, InvalidGrammarObject):
            backend.set_cache(key, value.copy())
    return value


def test_compile_errors_become_invalid_grammar_objects(backend):
    for key, words in [
        (("json", '{"type": "strin"}'), "/type"),
        (("json", "{not json"), "JSON"),
        (("regex", "[a-"), "regex"),
        (("ebnf", "root ::= ("), "unclosed group.*1:10"),
        (("structural_tag", "{}"), "structural tags"),
    ]:
        g = compile_key(backend, key)
        assert isinstance(g, InvalidGrammarObject), key
        assert re.search(words, g.error_message), (key, g.error_message)
    assert isinstance(compile_key(backend, ("json", "$$ANY$$")), fs.FormworkGrammar)


def test_a_decode_loop_through_sglangs_batch_masking(backend, tokenizer):
    """Four rows (a schema, a regex, an EBNF grammar and an unconstrained one) decoded with
    random logits: SGLang's SamplingBatchInfo builds and applies the mask through our
    grammar objects each step, the scheduler's rule advances them (accept, stop at
    termination). Every constrained row ends with a valid, complete output."""
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

    keys = [("json", json.dumps(PERSON)), ("regex", DATE_RE), ("ebnf", YESNO_EBNF)]
    grammars = [compile_key(backend, k) for k in keys] + [None]
    # A second request for a cached key is a fresh copy, not the same matcher.
    again = compile_key(backend, keys[1])
    assert isinstance(again, fs.FormworkGrammar) and again is not grammars[1] and again.matcher.num_accepted == 0
    n, vocab = len(grammars), 49152
    info = SamplingBatchInfo(
        temperatures=torch.ones(n, 1), top_ps=torch.ones(n), top_ks=torch.full((n,), -1), min_ps=torch.zeros(n),
        is_all_greedy=True, is_any_greedy=True, need_top_p_sampling=False, need_top_k_sampling=False,
        need_min_p_sampling=False, vocab_size=vocab, grammars=grammars, device="cpu",
    )
    gen = torch.Generator().manual_seed(0)
    outputs = [[] for _ in range(n)]
    for _step in range(120):
        if all(g is None or g.is_terminated() for g in grammars):
            break
        info.update_regex_vocab_mask()
        logits = torch.randn(n, vocab, generator=gen)
        raw = logits.clone()
        info.apply_logits_bias(logits)
        # The mask is exactly the matcher's allowed set (checked on one row per step).
        row = _step % 3
        if not grammars[row].is_terminated():
            kept = set(torch.nonzero(torch.isfinite(logits[row])).flatten().tolist())
            assert kept == {t for t in range(vocab) if grammars[row].matcher.is_token_allowed(t)}
        assert torch.equal(logits[3], raw[3]), "the unconstrained row is untouched"
        for i, g in enumerate(grammars):
            if g is None or g.is_terminated():
                continue
            t = int(torch.argmax(logits[i]))
            g.accept_token(t)
            outputs[i].append(t)
    assert all(g.is_terminated() for g in grammars[:3]), [len(o) for o in outputs]
    texts = [tokenizer.decode([t for t in o if t != EOS]) for o in outputs[:3]]
    assert all(o[-1] == EOS for o in outputs[:3])
    jsonschema.validate(json.loads(texts[0]), PERSON)
    assert re.fullmatch(DATE_RE, texts[1]), texts[1]
    assert texts[2] in ("Answer: yes.", "Answer: no."), texts[2]


def test_the_grammar_as_the_scheduler_drives_it(backend, tokenizer):
    import xgrammar

    g = compile_key(backend, ("json", json.dumps(PERSON)))
    doc = '{"name":"Ada","age":36}'
    ids = tokenizer.encode(doc, add_special_tokens=False)
    for t in ids[:4]:
        g.accept_token(t)
    with pytest.raises(ValueError, match="not allowed"):
        g.accept_token(EOS)  # the object is not complete: the scheduler aborts such a request
    g.rollback(2)  # speculative decoding: the verifier refused two drafts
    assert g.matcher.num_accepted == 2
    for t in ids[2:]:
        g.accept_token(t)
    # The batch mask as SGLang allocates, fills and applies it; XGrammar's CPU kernel (what
    # SGLang applies on the CPU for its XGrammar backend) agrees with formwork's.
    mask = g.allocate_vocab_mask(vocab_size=49152, batch_size=2, device="cpu")
    g.reset_vocab_mask(mask)
    from sglang.srt.constrained.base_grammar_backend import GrammarMask, GrammarRow

    g.fill_vocab_mask_batched([GrammarRow(row=1, grammar=g)], mask)
    mask = g.move_vocab_mask(mask, "cpu")
    logits = torch.randn(2, 49152, generator=torch.Generator().manual_seed(1))
    theirs = logits.clone()
    GrammarMask(g, mask).apply(logits)
    xgrammar.apply_token_bitmask_inplace(theirs, mask)
    assert torch.equal(logits, theirs)
    assert torch.isfinite(logits[0]).all(), "row 0 was not listed: left unconstrained"
    assert torch.nonzero(torch.isfinite(logits[1])).flatten().tolist() == [EOS]
    g.accept_token(EOS)
    assert g.is_terminated()
    g.accept_token(5)  # after termination the scheduler may still call it: ignored
    g.rollback(1)
    assert not g.is_terminated()


def test_jump_forward(backend, tokenizer):
    g = compile_key(backend, ("regex", r"The answer is [0-9]+\."))
    helper = g.try_jump_forward(tokenizer)
    assert helper == ([], "The answer is ")
    text, state = g.jump_forward_str_state(helper)
    assert text == "The answer is "
    # SGLang retokenizes the output with the jumped text and hands both token lists over.
    old = []
    new = tokenizer.encode(text, add_special_tokens=False)
    g.jump_and_retokenize(old, new, state)
    assert g.matcher.num_accepted == len(new)
    assert g.try_jump_forward(tokenizer) is None  # a digit is a choice
