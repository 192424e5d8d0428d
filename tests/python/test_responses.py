"""The OpenAI Responses API (`client.responses`), unchanged, against formwork serve:
create, parse with a pydantic `text_format`, the stream helper, `previous_response_id`, and a
function tool call round trip."""
import json

import openai
import pytest

from conftest import assert_alive
from models import CalendarEvents, Person, WeatherArgs


def weather_tool():
    params = WeatherArgs.model_json_schema()
    params["additionalProperties"] = False
    return {"type": "function", "name": "get_weather", "description": "Current weather in a city.",
            "parameters": params, "strict": True}


def test_create_text(oai, model):
    r = oai.responses.create(model=model, instructions="Answer in one short sentence.", input="Say hello.",
                             max_output_tokens=40, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete"), r
    assert r.output[0].type == "message" and r.output[0].role == "assistant"
    assert r.output_text and r.output_text == r.output[0].content[0].text
    u = r.usage
    assert u.output_tokens > 0 and u.total_tokens == u.input_tokens + u.output_tokens


def test_parse_pydantic(oai, model):
    r = oai.responses.parse(
        model=model,
        input=[
            {"role": "system", "content": "Extract calendar events from the text."},
            {"role": "user", "content": "On Friday, Alice (30) and Bob (25) have a team meeting."},
        ],
        text_format=CalendarEvents,
        temperature=0,
        max_output_tokens=600,
    )
    assert r.status == "completed", r
    assert isinstance(r.output_parsed, CalendarEvents), r
    assert len(r.output_parsed.events) >= 1
    CalendarEvents.model_validate_json(r.output_text)
    assert r.text.format.type == "json_schema" and r.text.format.strict


def test_json_schema_and_json_object_formats(oai, model):
    schema = Person.model_json_schema()
    schema["additionalProperties"] = False
    r = oai.responses.create(model=model, input="Invent a person. Answer in JSON.", max_output_tokens=200, temperature=0,
                             text={"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}})
    Person.model_validate_json(r.output_text)
    assert set(json.loads(r.output_text)) == {"name", "age"}
    r = oai.responses.create(model=model, input="Describe a cat as a JSON object.", max_output_tokens=200, temperature=0,
                             text={"format": {"type": "json_object"}})
    if r.status == "completed":
        assert isinstance(json.loads(r.output_text), dict)


def test_stream_helper_parses(oai, model):
    with oai.responses.stream(model=model, input="Invent a person. Answer in JSON.", text_format=Person,
                              temperature=0, max_output_tokens=200) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    for t in ("response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
              "response.output_text.delta", "response.output_text.done", "response.content_part.done",
              "response.output_item.done", "response.completed"):
        assert t in types, types
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 3
    # The helper's snapshot grows with each delta.
    assert deltas[-1].snapshot == "".join(e.delta for e in deltas)
    done = next(e for e in events if e.type == "response.output_text.done")
    assert isinstance(done.parsed, Person)
    assert isinstance(final.output_parsed, Person), final
    assert final.output_text == done.text == deltas[-1].snapshot
    assert final.usage.output_tokens > 0


def test_create_stream_raw_events(oai, model):
    stream = oai.responses.create(model=model, input="Count from 1 to 5.", stream=True, max_output_tokens=30, temperature=0)
    events = list(stream)
    assert events[0].type == "response.created"
    assert events[-1].type in ("response.completed", "response.incomplete")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == events[-1].response.output_text


def test_previous_response_id(oai, model):
    r1 = oai.responses.create(model=model, input="My name is Ada. Remember it.", max_output_tokens=30, temperature=0)
    r2 = oai.responses.create(model=model, previous_response_id=r1.id, input="What is my name?",
                              max_output_tokens=30, temperature=0)
    assert r2.previous_response_id == r1.id
    # The earlier turns are in the prompt: the first input and its answer.
    assert r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens
    got = oai.responses.retrieve(r2.id)
    assert got.id == r2.id and got.output_text == r2.output_text
    oai.responses.delete(r1.id)
    with pytest.raises(openai.NotFoundError) as e:
        oai.responses.create(model=model, previous_response_id=r1.id, input="Again?", max_output_tokens=5)
    assert e.value.body["param"] == "previous_response_id", e.value.body


def test_function_call_round_trip(oai, model):
    tools = [weather_tool()]
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = oai.responses.create(model=model, input=ask, tools=tools, tool_choice="required", temperature=0,
                             max_output_tokens=200, parallel_tool_calls=False)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1, r.output
    call = calls[0]
    assert call.name == "get_weather" and call.call_id.startswith("call_")
    args = WeatherArgs.model_validate_json(call.arguments)
    result = {"type": "function_call_output", "call_id": call.call_id,
              "output": json.dumps({"city": args.city, "temperature": 21, "unit": args.unit})}
    # With previous_response_id: only the result is sent.
    r2 = oai.responses.create(model=model, previous_response_id=r.id, input=[result], tools=tools, tool_choice="none",
                              temperature=0, max_output_tokens=60)
    assert r2.output[0].type == "message" and r2.output_text, r2.output
    # Without it: the call items go back as input, as the SDK returned them.
    r3 = oai.responses.create(model=model, input=ask + r.output + [result], tools=tools, tool_choice="none",
                              temperature=0, max_output_tokens=60)
    assert r3.output[0].type == "message" and r3.output_text


def test_parse_pydantic_function_tool(oai, model):
    # `openai.pydantic_function_tool` (the chat shape): the SDK converts it for this API and
    # parses each call's arguments into the model.
    r = oai.responses.parse(model=model, input="What is the weather in Oslo, in celsius?",
                            tools=[openai.pydantic_function_tool(WeatherArgs, name="get_weather")],
                            tool_choice="required", temperature=0, max_output_tokens=200)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls, r.output
    for c in calls:
        assert c.name == "get_weather"
        assert isinstance(c.parsed_arguments, WeatherArgs), c


def test_stream_helper_function_call(oai, model):
    with oai.responses.stream(model=model, input="What is the weather in Rome?", tools=[weather_tool()],
                              tool_choice="required", temperature=0, max_output_tokens=200) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types and "response.function_call_arguments.done" in types, types
    calls = [o for o in final.output if o.type == "function_call"]
    assert calls and all(c.name == "get_weather" for c in calls)
    for c in calls:
        WeatherArgs.model_validate_json(c.arguments)
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [d.arguments for d in done] == [c.arguments for c in calls]


def test_logprobs_of_the_message_text(oai, model):
    r = oai.responses.create(model=model, input="Say hello.", max_output_tokens=12, temperature=0,
                             include=["message.output_text.logprobs"], top_logprobs=2)
    part = r.output[0].content[0]
    assert part.logprobs, r
    # One entry per token, whose bytes spell the message text; alternatives best first.
    assert b"".join(bytes(e.bytes) for e in part.logprobs).decode() == part.text
    for e in part.logprobs:
        assert e.logprob <= 0 and len(e.top_logprobs) == 2
        values = [t.logprob for t in e.top_logprobs]
        assert values == sorted(values, reverse=True), values


def test_unsupported_and_unknown(oai, model, http):
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model=model, input="x", tools=[{"type": "web_search"}])
    assert e.value.body["param"] == "tools"
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model=model, input="x", previous_response_id="resp_unknown")
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve("resp_unknown")
    assert_alive(http)
