"""Tool calling with the official clients, unchanged: `openai.pydantic_function_tool` on
pydantic models with nested models and enums (their `$defs`), under every `tool_choice`;
parallel calls; the SDK's stream helper; Ollama's streamed chat with tools."""
import enum
import json
from typing import Annotated, List

import openai
from pydantic import BaseModel, Field

from models import Short, WeatherArgs


class ColumnType(str, enum.Enum):
    text = "text"
    integer = "integer"
    date = "date"


class Column(BaseModel):
    name: Short
    type: ColumnType


class Table(BaseModel):
    name: Short
    columns: Annotated[List[Column], Field(min_length=1, max_length=3)]


class CreateTable(BaseModel):
    """Create a database table."""

    table: Table
    if_not_exists: bool


class Reason(str, enum.Enum):
    unused = "unused"
    renamed = "renamed"


class DropTarget(BaseModel):
    # A `$def` whose name other tools' parameters use too (`Table` above): each tool's
    # references must reach its own definitions.
    schema_name: Short
    reason: Reason


class DropTable(BaseModel):
    """Drop a database table."""

    target: DropTarget
    cascade: bool


MESSAGES = [
    {"role": "system", "content": "You manage a database through tool calls."},
    {"role": "user", "content": "Create a table named users with columns id (integer) and name (text)."},
]


def parse_api(oai):
    beta = getattr(oai, "beta", None)
    chat = getattr(beta, "chat", None) if beta is not None else None
    if chat is not None and hasattr(chat.completions, "parse"):
        return chat.completions.parse
    return oai.chat.completions.parse


def test_defs_are_in_the_tool_parameters():
    # What this file is about: the SDK writes nested models and enums as `$defs` + `$ref`.
    params = openai.pydantic_function_tool(CreateTable)["function"]["parameters"]
    assert "$defs" in params and {"Table", "Column", "ColumnType"} <= set(params["$defs"])
    assert params["properties"]["table"] == {"$ref": "#/$defs/Table"}


def test_pydantic_tool_required(oai, model):
    r = parse_api(oai)(
        model=model, messages=MESSAGES, tools=[openai.pydantic_function_tool(CreateTable)],
        tool_choice="required", temperature=0, max_tokens=400,
    )
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.content is None
    assert len(c.message.tool_calls) >= 1
    for call in c.message.tool_calls:
        assert call.function.name == "CreateTable"
        assert isinstance(call.function.parsed_arguments, CreateTable), call
        CreateTable.model_validate_json(call.function.arguments)


def test_pydantic_tool_named_among_several(oai, model):
    tools = [openai.pydantic_function_tool(CreateTable), openai.pydantic_function_tool(DropTable)]
    for name, cls in (("DropTable", DropTable), ("CreateTable", CreateTable)):
        r = parse_api(oai)(
            model=model, messages=MESSAGES, tools=tools,
            tool_choice={"type": "function", "function": {"name": name}}, temperature=0, max_tokens=400,
        )
        calls = r.choices[0].message.tool_calls
        assert calls and all(call.function.name == name for call in calls), r
        for call in calls:
            assert isinstance(call.function.parsed_arguments, cls)


# One example call in the history, as each API writes an earlier call (an assistant message
# with `tool_calls`, then the tool's result). The default model's template cannot show tools,
# so formwork writes them into its system prompt (test_tools_reach_the_prompt) and the model
# replies with an envelope, `{"tool_calls": [...]}` or `{"response": "..."}`, under its grammar
# (formwork_engine::tool_prompt); earlier calls are shown to it as envelopes too.
EXAMPLE_ARGS = {"table": {"name": "orders", "columns": [{"name": "total", "type": "integer"}]}, "if_not_exists": True}
EXAMPLE_ASK = {"role": "user", "content": "Create a table named orders with a column total (integer)."}
SYSTEM = {"role": "system", "content": "You manage a database. Answer with a JSON tool call."}
FEW_SHOT = [
    SYSTEM,
    EXAMPLE_ASK,
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "CreateTable", "arguments": json.dumps(EXAMPLE_ARGS)}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "created"},
    MESSAGES[1],
]
FEW_SHOT_OLLAMA = [
    SYSTEM,
    EXAMPLE_ASK,
    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "CreateTable", "arguments": EXAMPLE_ARGS}}]},
    {"role": "tool", "content": "created", "tool_name": "CreateTable"},
    MESSAGES[1],
]


def test_tools_reach_the_prompt(oai, oll, model):
    # SmolLM2's chat template ignores `tools`; formwork writes the definitions into the system
    # prompt instead (formwork_engine::tool_prompt), so the prompt grows by them, and
    # /api/show lists `tools`.
    ask = [{"role": "user", "content": "Hi"}]
    tool = openai.pydantic_function_tool(WeatherArgs, name="get_weather")
    plain = oai.chat.completions.create(model=model, messages=ask, temperature=0, max_tokens=1)
    # max_tokens 1 leaves no room for the reply's envelope (formwork_engine::tool_prompt): the
    # reply is then free text, not an error.
    with_tools = oai.chat.completions.create(model=model, messages=ask, tools=[tool], temperature=0, max_tokens=1)
    assert with_tools.usage.prompt_tokens > plain.usage.prompt_tokens + 40, (with_tools.usage, plain.usage)
    assert "tools" in oll.show(model).capabilities


def test_pydantic_tool_auto(oai, model):
    tools = [openai.pydantic_function_tool(CreateTable), openai.pydantic_function_tool(DropTable)]
    r = parse_api(oai)(model=model, messages=FEW_SHOT, tools=tools, tool_choice="auto", temperature=0, max_tokens=400)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c.message
    for call in c.message.tool_calls:
        cls = {"CreateTable": CreateTable, "DropTable": DropTable}[call.function.name]
        assert isinstance(call.function.parsed_arguments, cls)


def test_parallel_calls(oai, model):
    # Two cities, one function: the default model makes two calls in one turn (greedy), each
    # validated; with `parallel_tool_calls: false` it makes one.
    params = WeatherArgs.model_json_schema()
    params["additionalProperties"] = False
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params, "strict": True}}]
    ask = [{"role": "user", "content": "Weather in Paris and in Rome?"}]
    r = oai.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required", temperature=0, max_tokens=300)
    calls = r.choices[0].message.tool_calls
    assert len(calls) >= 2, calls
    assert len({c.id for c in calls}) == len(calls)
    cities = [WeatherArgs.model_validate_json(c.function.arguments).city for c in calls]
    assert cities[:2] == ["Paris", "Rome"], cities
    r = oai.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required", temperature=0,
                                    max_tokens=300, parallel_tool_calls=False)
    assert len(r.choices[0].message.tool_calls) == 1


def test_parallel_tool_calls_false_gives_one_call(oai, model):
    tools = [openai.pydantic_function_tool(CreateTable)]
    for parallel in (True, False):
        r = oai.chat.completions.create(
            model=model, messages=MESSAGES, tools=tools, tool_choice="required",
            parallel_tool_calls=parallel, temperature=0, max_tokens=600,
        )
        calls = r.choices[0].message.tool_calls
        assert calls, r
        for call in calls:
            CreateTable.model_validate_json(call.function.arguments)
        if not parallel:
            assert len(calls) == 1, calls


def test_stream_helper_emits_arguments_done(oai, model):
    tools = [openai.pydantic_function_tool(CreateTable)]
    with oai.chat.completions.stream(
        model=model, messages=MESSAGES, tools=tools, tool_choice="required", temperature=0, max_tokens=400,
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert done, [e.type for e in events]
    # The arguments stream as they are generated, in many fragments.
    fragments = [e for e in events if e.type == "tool_calls.function.arguments.delta" and e.index == 0]
    assert len(fragments) > 3, fragments
    assert "".join(e.arguments_delta for e in fragments) == done[0].arguments
    for e in done:
        assert e.name == "CreateTable"
        assert isinstance(e.parsed_arguments, CreateTable)
    chunks = [e.chunk for e in events if e.type == "chunk"]
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content is None
    last = chunks[-1].choices[0]
    assert last.finish_reason == "tool_calls"
    assert not last.delta.tool_calls and last.delta.content is None
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert len(message.tool_calls) == len(done)
    assert isinstance(message.tool_calls[0].function.parsed_arguments, CreateTable)


def test_stream_helper_with_parallel_calls(oai, model):
    # Each call's arguments are closed: the first when the second starts, the last on the
    # finish reason.
    with oai.chat.completions.stream(
        model=model, messages=[{"role": "user", "content": "Weather in Paris and in Rome?"}],
        tools=[openai.pydantic_function_tool(WeatherArgs, name="get_weather")], tool_choice="required",
        temperature=0, max_tokens=300,
    ) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
    assert [e.index for e in done] == list(range(len(done))) and len(done) >= 2, done
    assert [e.parsed_arguments.city for e in done[:2]] == ["Paris", "Rome"]


# The ollama client rebuilds each tool's `parameters` through its own model, which keeps only
# `type`, `items`, `description` and `enum` of each property (a `$ref` is dropped before the
# request is sent), so its tools are written flat.
OLLAMA_TOOL = {"type": "function", "function": {
    "name": "CreateTable", "description": "Create a database table.",
    "parameters": {"type": "object", "required": ["table", "if_not_exists"], "properties": {
        "table": {"type": "object", "description": "name and columns"},
        "if_not_exists": {"type": "boolean"},
    }},
}}


def test_ollama_chat_with_tools_streams(oll, model):
    # Asked how it is, the model answers in text (the tools are in its system prompt; its
    # envelope's `response` key takes about two thirds of the choice here, with room for a
    # call, where "Hi!" or "Say hello to the database team." went to a call): that text must
    # stream in pieces (it used to come whole in the last line).
    options = {"temperature": 0, "num_predict": 300}
    parts = list(oll.chat(model=model, messages=[{"role": "user", "content": "Good morning! How are you?"}],
                          tools=[OLLAMA_TOOL], stream=True, options=options))
    assert parts[-1].done and all(not p.done for p in parts[:-1])
    assert not any(p.message.tool_calls for p in parts)
    assert sum(1 for p in parts if p.message.content) > 1, parts
    # Shown an example call, it calls: the call comes parsed in a line of its own, then the
    # closing line, as Ollama streams calls.
    parts = list(oll.chat(model=model, messages=FEW_SHOT_OLLAMA, tools=[OLLAMA_TOOL], stream=True, options=options))
    assert [p.done for p in parts] == [False, True], parts
    assert not parts[0].message.content
    for call in parts[0].message.tool_calls:
        assert call.function.name == "CreateTable"
        args = call.function.arguments
        assert isinstance(args["table"], dict) and isinstance(args["if_not_exists"], bool), args


def test_request_id(oai, model, http):
    r = http.get("/api/version")
    assert r.headers["x-request-id"].startswith("req_")
    r = http.get("/api/version", headers={"x-request-id": "mine-123"})
    assert r.headers["x-request-id"] == "mine-123"
    # The SDK reads it (`_request_id`), on answers and on errors.
    resp = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert resp._request_id and resp._request_id.startswith("req_")
    try:
        oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], tool_choice="required")
    except openai.BadRequestError as e:
        assert e.request_id and e.request_id.startswith("req_")
    else:
        raise AssertionError("tool_choice without tools must be a 400")
