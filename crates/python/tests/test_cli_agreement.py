"""The same schema gives the same accepted and refused set through Python as through the
Rust CLI (`formwork grammar check` / `compile`), on real MaskBench schemas and instances.

Every 10th file of the MaskBench development split (168 files), each instance serialized by
`json.dumps`, checked in both key orders. Through Python each document is checked twice:
as bytes (`accept_string`) and as the SmolLM2 tokens the `tokenizers` library gives it
(`accept_tokens`), which must agree with each other and with the CLI."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

import formwork
from conftest import SHARED

FILES = sorted((SHARED / "maskbench-dev").glob("*.json"))[::10]


def python_verdict(compiler, grammar, doc: str, tokenizer) -> bool:
    compiled = compiler.compile(grammar)
    by_bytes = formwork.Matcher(compiled)
    ok_bytes = by_bytes.accept_string(doc) and by_bytes.is_accepting()
    by_tokens = formwork.Matcher(compiled)
    ok_tokens = by_tokens.accept_tokens(tokenizer.encode(doc, add_special_tokens=False).ids) and by_tokens.is_accepting()
    assert ok_bytes == ok_tokens, f"bytes and tokens disagree on {doc[:200]!r}"
    return ok_bytes


@pytest.mark.parametrize("key_order", ["any", "listed"])
def test_same_verdicts_as_the_cli(cli, smollm2_info, smollm2_tokenizers, key_order):
    assert len(FILES) > 160
    compiler = formwork.GrammarCompiler(smollm2_info)
    flags = ["--any-key-order"] if key_order == "any" else []
    compiled = refused = checked = 0
    invalid_accepted = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in FILES:
            case = json.loads(f.read_text())
            schema_path = Path(tmp) / "schema.json"
            schema_path.write_text(json.dumps(case["schema"]))
            try:
                grammar = formwork.Grammar.from_json_schema(case["schema"], key_order=key_order)
            except formwork.FormworkError as e:
                # The CLI refuses it too, with the same message.
                r = cli("grammar", "compile", str(schema_path), *flags)
                assert r.returncode != 0, f"{f.name}: Python refused ({e}) but the CLI compiled it"
                assert str(e) in r.stderr.decode(), f"{f.name}: {r.stderr.decode()!r} lacks {str(e)!r}"
                refused += 1
                continue
            compiled += 1
            for t in case["tests"]:
                doc = json.dumps(t["data"])
                r = cli("grammar", "check", "--schema", str(schema_path), *flags, stdin=doc.encode())
                assert r.returncode in (0, 1), r.stderr.decode()
                rust = r.returncode == 0
                py = python_verdict(compiler, grammar, doc, smollm2_tokenizers)
                assert py == rust, f"{f.name}: Python {py}, CLI {rust} ({r.stdout.decode()}) on {doc[:200]!r}"
                checked += 1
                if py and not t["valid"]:
                    invalid_accepted.append((f.name, doc[:200]))
    print(f"key order {key_order}: {compiled} compiled, {refused} refused, {checked} instances agree")
    assert compiled > 130 and checked > 400
    assert not invalid_accepted, f"invalid instances accepted: {invalid_accepted}"


def test_same_verdicts_for_gbnf(cli, smollm2_info, smollm2_tokenizers):
    grammar_text = 'root ::= item ("," " "? item)* "."\nitem ::= [a-z]+ | "\\"" [^"]* "\\""\n'
    docs = ["a, b,c.", "a.", '"x y", z.', "a,, b.", "a b.", "", "a", '"unclosed.']
    compiler = formwork.GrammarCompiler(smollm2_info)
    grammar = formwork.Grammar.from_gbnf(grammar_text)
    with tempfile.NamedTemporaryFile("w", suffix=".gbnf") as g:
        g.write(grammar_text)
        g.flush()
        verdicts = []
        for d in docs:
            r = cli("grammar", "check", "--grammar", g.name, stdin=d.encode())
            assert r.returncode in (0, 1), r.stderr.decode()
            py = python_verdict(compiler, grammar, d, smollm2_tokenizers)
            assert py == (r.returncode == 0), d
            verdicts.append(py)
    assert verdicts == [True, True, True, False, False, False, False, False]
