"""Shared fixtures: where the server is, and clients pointed at it.

run.sh starts `formwork serve` and sets FORMWORK_URL (and OLLAMA_HOST, which the module-level
`ollama.chat` / `ollama.generate` functions read).
"""
import os

import httpx
import ollama
import openai
import pytest

URL = os.environ.get("FORMWORK_URL", "http://127.0.0.1:11434")
MODEL = os.environ.get("FORMWORK_TEST_MODEL", "smollm2")


@pytest.fixture(scope="session")
def url():
    return URL


@pytest.fixture(scope="session")
def model():
    return MODEL


@pytest.fixture(scope="session")
def oai():
    return openai.OpenAI(base_url=URL + "/v1", api_key="formwork", timeout=300, max_retries=0)


@pytest.fixture(scope="session")
def oll():
    return ollama.Client(host=URL, timeout=300)


@pytest.fixture(scope="session")
def http():
    with httpx.Client(base_url=URL, timeout=300) as c:
        yield c


def assert_alive(http):
    """The server still answers after a bad request."""
    r = http.get("/api/version")
    assert r.status_code == 200, r.text
    assert "version" in r.json()
