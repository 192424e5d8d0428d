"""transformers' `model.generate()` on SmolLM2-135M-Instruct (the default GGUF, dequantized
by transformers, CPU torch) through `formwork.hf.LogitsProcessor`: every output is complete
and valid, under a JSON Schema and under a GBNF grammar, greedy and sampled, batched, with
one processor reused across calls."""

from __future__ import annotations

import json
import re

import pytest

import formwork

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")
import formwork.hf  # noqa: E402  (needs torch and transformers)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "colour": {"enum": ["red", "green", "blue"]},
    },
    "required": ["name", "age", "colour"],
    "additionalProperties": False,
}
LIST_GBNF = r"""
root ::= "Colours: " colour (", " colour){2} "."
colour ::= [a-z]{3,10}
"""
LIST_RE = re.compile(r"Colours: [a-z]{3,10}(, [a-z]{3,10}){2}\.")


def prompts(tok, questions):
    texts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True) for q in questions]
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok(texts, return_tensors="pt", padding=True)


def generate(model, tok, proc, questions, **kw):
    inputs = prompts(tok, questions)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            logits_processor=[proc],
            pad_token_id=tok.pad_token_id,
            eos_token_id=2,
            **kw,
        )
    rows = out[:, inputs["input_ids"].shape[1] :].tolist()
    texts = []
    for row in rows:
        assert 2 in row, f"the output did not finish (no <|im_end|>): {tok.decode(row)!r}"
        texts.append(tok.decode(row[: row.index(2)]))
    return texts


@pytest.fixture(scope="module")
def setup(hf_model):
    tok, model = hf_model
    info = formwork.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    assert info.stop_token_ids == [tok.eos_token_id] == [2]
    return tok, model, formwork.GrammarCompiler(info)


def test_json_schema_greedy_and_sampled_batch(setup):
    tok, model, compiler = setup
    proc = formwork.hf.LogitsProcessor(compiler.compile_json_schema(PERSON, whitespace="compact"))
    questions = ["Invent a person as JSON.", "Describe a pirate: name, age, favourite colour."]
    texts = generate(model, tok, proc, questions, max_new_tokens=48, do_sample=False)
    # The same processor again, sampling: it starts fresh matchers for the new call.
    torch.manual_seed(1)
    texts += generate(model, tok, proc, questions, max_new_tokens=48, do_sample=True, temperature=1.0, top_k=0)
    for t in texts:
        jsonschema.validate(json.loads(t), PERSON)
    print(texts)


def test_gbnf_grammar_and_reuse_across_batch_sizes(setup):
    tok, model, compiler = setup
    compiled = compiler.compile_gbnf(LIST_GBNF)
    proc = formwork.hf.LogitsProcessor(compiled)
    texts = generate(model, tok, proc, ["Name three colours."], max_new_tokens=48, do_sample=False)
    texts += generate(model, tok, proc, ["List three colours.", "Your favourite colours?", "Three colours, please."], max_new_tokens=48, do_sample=True)
    for t in texts:
        assert LIST_RE.fullmatch(t), t
        m = formwork.Matcher(compiled)
        assert m.accept_string(t) and m.is_accepting()
    print(texts)


def test_one_grammar_per_row(setup):
    tok, model, compiler = setup
    yes_no = compiler.compile_regex(r"(yes|no)")
    number = compiler.compile_json_schema({"type": "integer", "minimum": 1, "maximum": 9}, whitespace="compact", canonical_integers=True)
    proc = formwork.hf.LogitsProcessor([yes_no, number])
    a, b = generate(model, tok, proc, ["Is water wet?", "Pick a digit."], max_new_tokens=8, do_sample=False)
    assert a in ("yes", "no")
    assert 1 <= int(b) <= 9
    with pytest.raises(ValueError, match="2 compiled grammars for a batch of 3"):
        generate(model, tok, proc, ["a", "b", "c"], max_new_tokens=2)


def test_unconstrained_output_would_not_validate(setup):
    """The constraint does the work: the same greedy prompt without it is not the JSON."""
    tok, model, _ = setup
    inputs = prompts(tok, ["Invent a person as JSON."])
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id)
    text = tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    try:
        jsonschema.validate(json.loads(text), PERSON)
        pytest.fail(f"the free output validated already: {text!r}")
    except (ValueError, jsonschema.ValidationError):
        pass


def test_processor_steps_restarts_and_refuses_reordered_rows(smollm2_info, smollm2_tokenizers):
    """The processor's bookkeeping, called as generate() calls it, without a model."""
    compiled = formwork.GrammarCompiler(smollm2_info).compile_gbnf('root ::= "a" "b" | "b" "a"')
    a, b = smollm2_tokenizers.token_to_id("a"), smollm2_tokenizers.token_to_id("b")
    n = smollm2_info.vocab_size
    proc = formwork.hf.LogitsProcessor(compiled)

    def step(ids):
        scores = proc(torch.tensor(ids), torch.zeros(len(ids), n))
        return [set(torch.nonzero(torch.isfinite(r)).flatten().tolist()) for r in scores]

    prompt = [[5, 6, 7], [5, 6, 7]]
    first = step(prompt)
    assert {a, b} <= first[0] and 2 not in first[0] and first[0] == first[1]
    ids = [prompt[0] + [a], prompt[1] + [b]]
    assert step(ids) == [{b}, {a}]
    ids = [ids[0] + [b], ids[1] + [a]]
    assert step(ids) == [{2}, {2}], "complete: only EOS"
    ids = [ids[0] + [2], ids[1] + [2]]
    assert all(len(s) == n for s in step(ids)), "finished rows are left unmasked"
    # A new call (another shape) starts fresh matchers.
    assert step(prompt[:1]) == first[:1]
    assert step([prompt[0] + [a]]) == [{b}]
    # Rows whose continuations swap places (beam search) are refused.
    step(prompt)
    step([prompt[0] + [a], prompt[1] + [b]])
    with pytest.raises(RuntimeError, match="beam search"):
        step([prompt[1] + [b, a], prompt[0] + [a, b]])
    # A token the grammar does not allow (another processor after formwork's) is an error.
    proc.reset()
    step(prompt)
    with pytest.raises(RuntimeError, match="does not allow"):
        step([prompt[0] + [a], prompt[1] + [7]])
