"""The model store through the official Ollama client: create, copy, list, show, chat with an
alias, delete, pull. Aliases are made under unique names in the server's FORMWORK_HOME and
deleted again."""
import os

import ollama
import pytest


def _names(oll):
    return [m.model for m in oll.list().models]


@pytest.fixture()
def alias(oll, model):
    name = f"fw-test-pirate-{os.getpid()}"
    yield name
    for n in (name, name + "-copy"):
        try:
            oll.delete(n)
        except ollama.ResponseError:
            pass


def test_create_copy_list_show_chat_delete(oll, model, alias):
    r = oll.create(model=alias, from_=model, system="You are a pirate. Say Arr.", parameters={"temperature": 0, "num_predict": 8})
    assert r.status == "success"
    assert f"{alias}:latest" in _names(oll)

    shown = oll.show(alias)
    assert "You are a pirate" in shown.modelfile
    assert "temperature" in shown.parameters

    # Usable at once, with its parameters as defaults (num_predict 8 bounds the answer).
    reply = oll.chat(model=alias, messages=[{"role": "user", "content": "Hello"}])
    assert reply.message.content
    assert reply.eval_count <= 8

    oll.copy(alias, alias + "-copy")
    assert f"{alias}-copy:latest" in _names(oll)
    oll.delete(alias + "-copy")
    oll.delete(alias)
    names = _names(oll)
    assert f"{alias}:latest" not in names and f"{alias}-copy:latest" not in names
    with pytest.raises(ollama.ResponseError) as e:
        oll.delete(alias)
    assert e.value.status_code == 404


def test_create_from_a_path_is_refused(oll, alias):
    with pytest.raises(ollama.ResponseError) as e:
        oll.create(model=alias, from_="/etc/passwd")
    assert e.value.status_code == 400
    assert "formwork create" in str(e.value)


def test_pull_a_present_model_is_a_quick_success(oll, model):
    assert oll.pull(model).status == "success"
    statuses = [p.status for p in oll.pull(model, stream=True)]
    assert statuses[-1] == "success"
    with pytest.raises(ollama.ResponseError) as e:
        oll.pull("no-such-model-anywhere:7b")
    assert e.value.status_code == 404


def test_copy_unknown_source_is_404(oll):
    with pytest.raises(ollama.ResponseError) as e:
        oll.copy("no-such-model-anywhere", "x-copy")
    assert e.value.status_code == 404
