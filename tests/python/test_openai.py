"""The OpenAI Python SDK, unchanged, against formwork serve."""
import json

import openai
import pytest

from models import CalendarEvents, Person, WeatherArgs


def parse_api(oai):
    # `client.beta.chat.completions.parse` in openai 1.x; newer SDKs also expose it without `beta`.
    beta = getattr(oai, "beta", None)
    chat = getattr(beta, "chat", None) if beta is not None else None
    if chat is not None and hasattr(chat.completions, "parse"):
        return chat.completions.parse
    return oai.chat.completions.parse


def test_models_list(oai, model):
    ids = [m.id for m in oai.models.list().data]
    assert model in ids


def test_parse_nested_pydantic(oai, model):
    completion = parse_api(oai)(
        model=model,
        messages=[
            {"role": "system", "content": "Extract calendar events from the text."},
            {"role": "user", "content": "On Friday, Alice (30) and Bob (25) have a team meeting."},
        ],
        response_format=CalendarEvents,
        temperature=0,
        max_tokens=600,
    )
    msg = completion.choices[0].message
    assert isinstance(msg.parsed, CalendarEvents), msg
    assert len(msg.parsed.events) >= 1
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens > 0


def test_json_schema_strict(oai, model):
    schema = Person.model_json_schema()
    schema["additionalProperties"] = False
    r = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Invent a person. Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}},
        max_tokens=200,
        seed=1,
    )
    content = r.choices[0].message.content
    p = Person.model_validate_json(content)
    assert set(json.loads(content)) == {"name", "age"}
    assert p.age == int(p.age)


def test_json_object(oai, model):
    r = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Give a JSON object describing a cat."}],
        response_format={"type": "json_object"},
        max_tokens=200,
        temperature=0,
    )
    # Truncation-proof: a budget-closed answer (finish_reason "length") parses too.
    assert r.choices[0].finish_reason in ("stop", "length")
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_streaming(oai, model):
    stream = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Say hello in three words."}],
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=30,
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text.strip()
    assert finish in ("stop", "length")
    assert usage is not None and usage.completion_tokens > 0


def test_streaming_with_schema(oai, model):
    schema = Person.model_json_schema()
    stream = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Invent a person."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}},
        stream=True,
        max_tokens=200,
        seed=1,
    )
    text = "".join((c.choices[0].delta.content or "") for c in stream if c.choices)
    Person.model_validate_json(text)


def test_tools_required(oai, model):
    params = WeatherArgs.model_json_schema()
    params["additionalProperties"] = False
    tools = [
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": params, "strict": True}},
    ]
    r = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=tools,
        tool_choice="required",
        max_tokens=200,
        seed=1,
    )
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    WeatherArgs.model_validate_json(call.function.arguments)


def test_tool_named(oai, model):
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": WeatherArgs.model_json_schema()}},
        {"type": "function", "function": {"name": "get_person", "parameters": Person.model_json_schema()}},
    ]
    r = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Who is Ada?"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_person"}},
        # Greedy: at the default temperature SmolLM2 sometimes spends the budget inside the
        # call (the call is then cut at `length` and reported as an error, not returned).
        temperature=0,
        seed=1,
        max_tokens=400,
    )
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "get_person"
    Person.model_validate_json(call.function.arguments)


def test_completions_and_n(oai, model):
    r = oai.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.choices[0].text
    r = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], n=2, max_tokens=5)
    assert [c.index for c in r.choices] == [0, 1]
    assert all(c.finish_reason in ("stop", "length") for c in r.choices)


def test_schema_in_prompt_extension(oai, model):
    # formwork extension, through the SDK's `extra_body`: the schema goes into the prompt too
    # (more prompt tokens), and the answer still matches it.
    schema = Person.model_json_schema()
    schema["additionalProperties"] = False
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
    msgs = [{"role": "user", "content": "Invent a person."}]
    plain = oai.chat.completions.create(model=model, messages=msgs, response_format=fmt, max_tokens=100, temperature=0)
    shown = oai.chat.completions.create(
        model=model, messages=msgs, response_format=fmt, max_tokens=100, temperature=0,
        extra_body={"schema_in_prompt": True},
    )
    assert shown.usage.prompt_tokens > plain.usage.prompt_tokens + 10
    Person.model_validate_json(shown.choices[0].message.content)


def test_whitespace_extension_lays_out_the_answer(oai, model):
    # formwork extension, through `extra_body`: "pretty" is the layout json.dumps(indent=2)
    # writes (every whitespace token forced), "compact" has none.
    schema = Person.model_json_schema()
    schema["additionalProperties"] = False
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
    msgs = [{"role": "user", "content": "Invent a person."}]
    for style in ("pretty", "compact"):
        r = oai.chat.completions.create(
            model=model, messages=msgs, response_format=fmt, max_tokens=120, temperature=0,
            extra_body={"whitespace": style},
        )
        text = r.choices[0].message.content
        person = Person.model_validate_json(text)
        data = json.loads(text)
        if style == "pretty":
            assert text == json.dumps(data, indent=2, ensure_ascii=False), text
        else:
            assert text == json.dumps(data, separators=(",", ":"), ensure_ascii=False), text
        assert person.name
    with pytest.raises(openai.BadRequestError, match="whitespace"):
        oai.chat.completions.create(model=model, messages=msgs, response_format=fmt, extra_body={"whitespace": "tidy"})


def test_tight_max_tokens_still_gives_valid_json(oai, model):
    # An open-ended schema and a budget far too small for what the model wants to write: the
    # engine closes the document in time, so the answer parses even when cut (finish_reason
    # "length").
    schema = {"type": "object", "properties": {"story": {"type": "string"}, "moral": {"type": "string"}},
              "required": ["story", "moral"], "additionalProperties": False}
    for seed in (1, 2, 3):
        r = oai.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Write a long story about a dragon, as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "story", "schema": schema, "strict": True}},
            max_tokens=30, seed=seed,
        )
        doc = json.loads(r.choices[0].message.content)
        assert set(doc) == {"story", "moral"}
        assert r.choices[0].finish_reason in ("length", "stop")
    # Below the shortest valid answer: a clear 400, not a broken document.
    import openai
    import pytest
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema", "json_schema": {"name": "story", "schema": schema, "strict": True}},
            max_tokens=3,
        )
    assert "raise it to at least" in str(e.value)


def test_embeddings(oai, model):
    """client.embeddings.create: the SDK asks for base64 by default and decodes it."""
    import openai
    import pytest
    r = oai.embeddings.create(model=model, input=["the cat sat", "the cat sat", "stock prices fell"])
    assert [d.index for d in r.data] == [0, 1, 2]
    assert len(r.data[0].embedding) == 576  # SmolLM2-135M's hidden size
    assert r.data[0].embedding == r.data[1].embedding
    assert abs(sum(x * x for x in r.data[0].embedding) - 1.0) < 1e-3
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens
    floats = oai.embeddings.create(model=model, input="the cat sat", encoding_format="float")
    assert all(abs(a - b) < 1e-6 for a, b in zip(floats.data[0].embedding, r.data[0].embedding))
    with pytest.raises(openai.BadRequestError):
        oai.embeddings.create(model=model, input="")


def test_logprobs_under_a_schema(oai, model):
    """logprobs of a constrained answer: the masked distribution (top_logprobs sorted, their
    mass at most 1) and the tokens spell the content."""
    import math

    schema = Person.model_json_schema()
    schema["additionalProperties"] = False
    r = oai.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Invent a person. Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}},
        max_tokens=200,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    choice = r.choices[0]
    entries = choice.logprobs.content
    assert entries, "no logprobs returned"
    assert b"".join(bytes(e.bytes) for e in entries).decode() == choice.message.content
    for e in entries:
        top = e.top_logprobs
        assert 1 <= len(top) <= 3
        values = [t.logprob for t in top]
        assert values == sorted(values, reverse=True), values
        assert sum(math.exp(v) for v in values) <= 1 + 1e-6
        # The model's distribution over the allowed tokens (the repeat penalty, on by default,
        # may make greedy pick another than the first).
        assert e.logprob <= top[0].logprob + 1e-6
        if len(top) == 1:
            assert e.logprob == 0 and top[0].token == e.token  # the only allowed token
