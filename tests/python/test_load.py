"""A bounded load test: 64 concurrent clients (issue 13), each asking for schema-constrained output.
All must be answered and valid. Throughput and latency percentiles are printed (run with -s)
and written to $FORMWORK_LOAD_REPORT when set."""
import concurrent.futures as cf
import json
import os
import time

import openai

from models import Person

CLIENTS = int(os.environ.get("FORMWORK_LOAD_CLIENTS", "64"))


def one(url, model, i):
    client = openai.OpenAI(base_url=url + "/v1", api_key="formwork", timeout=600, max_retries=0)
    t = time.perf_counter()
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": f"Invent person number {i}."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": Person.model_json_schema(), "strict": True}},
        max_tokens=120,
        seed=i,
    )
    dt = time.perf_counter() - t
    Person.model_validate_json(r.choices[0].message.content)
    return dt, r.usage.completion_tokens


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def test_fifty_concurrent_schema_clients(url, model):
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=CLIENTS) as ex:
        results = list(ex.map(lambda i: one(url, model, i), range(CLIENTS)))
    wall = time.perf_counter() - t0
    assert len(results) == CLIENTS
    lat = [r[0] for r in results]
    tokens = sum(r[1] for r in results)
    report = {
        "clients": CLIENTS,
        "all_valid": True,
        "wall_s": round(wall, 2),
        "requests_per_s": round(CLIENTS / wall, 3),
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1),
        "latency_s": {p: round(pct(lat, int(p[1:])), 2) for p in ("p50", "p90", "p99")} | {"max": round(max(lat), 2)},
    }
    print("\nLOAD", json.dumps(report))
    if os.environ.get("FORMWORK_LOAD_REPORT"):
        with open(os.environ["FORMWORK_LOAD_REPORT"], "w") as f:
            json.dump(report, f, indent=2)
