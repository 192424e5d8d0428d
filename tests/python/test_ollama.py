"""The Ollama Python client, unchanged, against formwork serve."""
import json

import ollama

from models import Country, Person


def test_chat_with_schema(model):
    response = ollama.chat(
        model=model,
        messages=[{"role": "user", "content": "Tell me about Canada."}],
        format=Country.model_json_schema(),
        options={"temperature": 0, "num_predict": 300},
    )
    country = Country.model_validate_json(response.message.content)
    assert country.name
    assert response.done and response.done_reason == "stop"
    assert response.eval_count > 0 and response.total_duration > 0


def test_chat_format_json(model):
    response = ollama.chat(
        model=model,
        messages=[{"role": "user", "content": "Describe a dog as JSON."}],
        format="json",
        options={"temperature": 0, "num_predict": 200},
    )
    # Truncation-proof: a budget-closed answer (done_reason "length") parses too.
    assert response.done_reason in ("stop", "length")
    assert isinstance(json.loads(response.message.content), dict)


def test_chat_streaming(model):
    parts = list(ollama.chat(model=model, messages=[{"role": "user", "content": "Count to five."}], stream=True, options={"num_predict": 40}))
    assert len(parts) >= 2
    assert parts[-1].done and parts[-1].done_reason in ("stop", "length")
    assert not any(p.done for p in parts[:-1])
    assert "".join(p.message.content for p in parts).strip()


def test_chat_streaming_with_schema(model):
    text = ""
    for part in ollama.chat(
        model=model, messages=[{"role": "user", "content": "Invent a person."}], format=closed(Person.model_json_schema()), stream=True, options={"num_predict": 300, "seed": 1}
    ):
        text += part.message.content
    Person.model_validate_json(text)


def test_generate(model):
    r = ollama.generate(model=model, prompt="Why is the sky blue? One sentence.", options={"num_predict": 40, "seed": 3})
    assert r.response.strip()
    assert r.done and r.prompt_eval_count > 0
    parts = list(ollama.generate(model=model, prompt="Hello", stream=True, options={"num_predict": 10}))
    assert parts[-1].done


def test_generate_with_schema(model):
    r = ollama.generate(model=model, prompt="Invent a person.", format=closed(Person.model_json_schema()), options={"temperature": 0, "num_predict": 300})
    Person.model_validate_json(r.response)


def test_list_and_show(oll, model):
    names = [m.model for m in oll.list().models]
    assert any(n.split(":")[0] == model for n in names), names
    s = oll.show(model)
    assert "completion" in (s.capabilities or [])
    # SmolLM2's template cannot show tools; formwork writes them into the system prompt.
    assert "tools" in (s.capabilities or [])


def test_ps_lists_the_loaded_model(oll, model):
    loaded = oll.ps().models
    assert any(m.model.split(":")[0] == model for m in loaded), loaded
    m = next(m for m in loaded if m.model.split(":")[0] == model)
    assert m.size > 0 and m.expires_at is not None and m.expires_at.year > 2100
    assert m.details is not None and m.details.format == "gguf"


def test_embed(oll, model):
    """ollama.embed (/api/embed) and the legacy ollama.embeddings: unit vectors of the
    model's width, the same for the same text; /api/show lists the capability."""
    r = oll.embed(model=model, input=["the cat sat", "a dog ran", "the cat sat"])
    assert len(r.embeddings) == 3
    width = len(r.embeddings[0])
    assert width == 576  # SmolLM2-135M's hidden size
    assert r.embeddings[0] == r.embeddings[2]
    assert r.embeddings[0] != r.embeddings[1]
    assert abs(sum(x * x for x in r.embeddings[0]) - 1.0) < 1e-3
    assert r.prompt_eval_count > 0
    legacy = oll.embeddings(model=model, prompt="the cat sat")
    assert len(legacy.embedding) == width
    assert "embedding" in oll.show(model).capabilities


def closed(schema):
    """The schema without additional properties. With the JSON Schema default (additional
    properties allowed) SmolLM2 can keep inventing keys until the token budget cuts the
    document; a cut document is not valid JSON (truncation-proof output is issue 6)."""
    schema = dict(schema)
    schema["additionalProperties"] = False
    return schema


def test_chat_logprobs_under_a_schema(model):
    """ollama.chat(..., logprobs=True, top_logprobs=2) (the client's own kwargs, ollama-python
    0.6.1+): one entry per token, alternatives sorted with mass at most 1."""
    import math

    response = ollama.chat(
        model=model,
        messages=[{"role": "user", "content": "Invent a person as JSON."}],
        format=Person.model_json_schema(),
        options={"temperature": 0, "num_predict": 200},
        logprobs=True,
        top_logprobs=2,
    )
    entries = response.logprobs
    assert entries, "no logprobs returned"
    assert "".join(e.token for e in entries) == response.message.content
    for e in entries:
        values = [t.logprob for t in e.top_logprobs]
        assert 1 <= len(values) <= 2
        assert values == sorted(values, reverse=True), values
        assert sum(math.exp(v) for v in values) <= 1 + 1e-6
        assert e.logprob <= values[0] + 1e-6
