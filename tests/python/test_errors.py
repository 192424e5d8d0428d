"""Bad input gets the right 4xx in each API's own shape, and the server keeps serving."""
import ollama
import openai
import pytest

from conftest import assert_alive


def test_malformed_body(http):
    r = http.post("/api/chat", content=b'{"model": "smollm2", "messages": [', headers={"content-type": "application/json"})
    assert r.status_code == 400 and isinstance(r.json()["error"], str)
    r = http.post("/v1/chat/completions", content=b"this is not json", headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["message"]
    assert_alive(http)


def test_unknown_model(oai, http):
    with pytest.raises(openai.NotFoundError) as e:
        oai.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 404 and e.value.code == "model_not_found"
    with pytest.raises(ollama.ResponseError) as e:
        ollama.chat(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 404
    assert_alive(http)


def test_invalid_schema(oai, http, model):
    bad = {"type": "object", "properties": {"a": {"type": "strnig"}}}
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": bad}},
        )
    with pytest.raises(ollama.ResponseError) as e:
        ollama.chat(model=model, messages=[{"role": "user", "content": "x"}], format=bad)
    assert e.value.status_code == 400
    r = http.post("/api/chat", json={"model": model, "messages": [{"role": "user", "content": "x"}], "format": "yaml"})
    assert r.status_code == 400 and "yaml" in r.json()["error"]
    assert_alive(http)


def test_oversized_request(http, model):
    big = "word " * (1 << 20)  # 5 MiB, over the 2 MiB default body limit
    r = http.post("/api/generate", json={"model": model, "prompt": big})
    assert r.status_code == 413, r.text
    r = http.post("/v1/completions", json={"model": model, "prompt": big})
    assert r.status_code == 413
    assert r.json()["error"]["message"]
    assert_alive(http)
