"""The package's one HTTP client (pipeline/core/http.py): no other module makes a request, its
bounds are sane or refused, and an endpoint's identity ignores the case of its scheme and host
for both served clients. Its request loop, deadline and redaction against live servers:
tests/core/test_posting.py (embeddings, judge) and tests/ingest/test_download_hostile.py (the
Datasets API and its files)."""

from __future__ import annotations

import ast
import math
import time
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.core.http import Bounds, Endpoint, Stall, endpoint_identity
from pipeline.encoding.served import ServedEncoder
from pipeline.judging.assessor import assessor
from pipeline.judging.chat import chat_url
from pipeline.models import served_model

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline"
THE_CLIENT = PACKAGE / "core" / "http.py"
# what makes a request: HTTP libraries, and the standard library's clients
HTTP_MODULES = ("urllib3", "http.client", "requests", "httpx", "urllib.request", "aiohttp",
                "pycurl", "httplib2")


def _imported(tree: ast.AST) -> set[str]:
    """Every module a file imports, by its full dotted name (from http import client: both
    http and http.client), and every name given to importlib.import_module or __import__."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                names.add(node.args[0].value)
    return names


def test_no_module_but_the_one_client_imports_an_http_library():
    """Every HTTP request of the package is core/http.py's (the S2 client once had its own
    urllib3 loop, without the deadline's watchdog): no other module of pipeline/ imports
    urllib3, http.client, requests, httpx or urllib.request."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = sorted(name for name in _imported(ast.parse(path.read_text(), str(path)))
                       if any(name == m or name.startswith(m + ".") for m in HTTP_MODULES))
        if found and path != THE_CLIENT:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert not offenders, offenders
    assert "urllib3" in _imported(ast.parse(THE_CLIENT.read_text()))  # the scan sees imports


@pytest.mark.parametrize("field, value", [
    ("backoff", -1.0), ("backoff", math.nan), ("backoff", math.inf), ("max_wait", -0.5),
    ("deadline", 0.0), ("read", math.nan), ("retries", -1), ("retries", 10**9),
    ("retries", 2.5), ("notice", math.nan),
])
def test_bounds_that_make_no_sense_are_refused_where_they_are_made(field, value):
    """A negative or NaN backoff once reached time.sleep (`sleep length must be
    non-negative`) in the middle of a download: the client's bounds refuse it when made (the
    options refuse it first, in one line; this is the client's own assertion)."""
    sane = dict(retries=3, backoff=1.0, max_wait=10.0, connect=1.0, read=1.0, deadline=5.0,
                notice=1.0, pause=time.sleep, clock=time.monotonic)
    Bounds(**sane)
    with pytest.raises(ValueError, match=field):
        Bounds(**{**sane, field: value})
    with pytest.raises(ValueError, match="window"):
        Stall(1.0, window=-1.0)


def test_an_endpoint_carries_its_key_in_the_authorization_header_only():
    """The served clients (embeddings, reranker, judge) are each an Endpoint: the key goes in
    the Authorization header and nowhere else of the request, none without a key, the pool
    keeps `at_once` connections, and a reply that is not what was asked is shown with the
    key hidden."""
    key = "sk-endpoint-0123456789abcdef"
    keyed = Endpoint("http://127.0.0.1:9/v1/embeddings", key, 3)
    assert keyed.headers == {"Content-Type": "application/json",
                             "Authorization": f"Bearer {key}"}
    assert Endpoint(keyed.url, None, 3).headers == {"Content-Type": "application/json"}
    assert keyed.pool.connection_pool_kw["maxsize"] == 3
    with pytest.raises(InputError) as refused:
        keyed.json_reply(f"no JSON, only {key}".encode(), lambda reply: True, "not JSON", "fix")
    assert key[3:] not in str(refused.value) and "<key>" in str(refused.value)
    assert keyed.json_reply(b'{"data": []}', lambda reply: "data" in reply, "", "") == \
        {"data": []}


def test_a_retrys_wait_doubles_to_its_cap_and_takes_retry_after_capped():
    bounds = Bounds(5, 1.0, 6.0, 1.0, 1.0, 60.0, 10.0, time.sleep, time.monotonic)
    assert [bounds.wait(n) for n in range(5)] == [1.0, 2.0, 4.0, 6.0, 6.0]
    assert bounds.wait(0, 3.0) == 3.0 and bounds.wait(0, 1000.0) == 6.0
    jittered = Bounds(5, 1.0, 60.0, 1.0, 1.0, 60.0, 10.0, time.sleep, time.monotonic, True)
    assert all(2.0 <= jittered.wait(2) <= 4.0 for _ in range(50))


@pytest.mark.parametrize("url, same", [
    ("HTTP://127.0.0.1:8000/v1/embeddings", True),
    ("http://LOCALHOST:8000/v1/embeddings", False),  # another host name: another endpoint
    ("http://127.0.0.1:8000/V1/embeddings", False),  # a path is the server's to tell apart
])
def test_the_case_of_a_scheme_and_host_makes_no_other_endpoint(url, same):
    """JUDGE_URL=HTTP://host/... once counted as another endpoint than http://host/...: the
    embeddings' store refused, the judgments of the same server not merged. Both clients
    compare core/http.endpoint_identity; a URL written in lower case is unchanged by it, so
    nothing made before is stale."""
    made = "http://127.0.0.1:8000/v1/embeddings"
    assert endpoint_identity(made) == made
    entry = served_model("api:org/model-7b", {"EMBEDDINGS_URL": url})
    change = ServedEncoder.identity_change({"model": {"endpoint": made}}, entry)
    assert (change is None) == same, change
    if url.startswith("HTTP://"):
        judge_now = assessor("api:org/model-7b", {"JUDGE_URL": url.removesuffix("/v1/embeddings")})
        judge_before = assessor("api:org/model-7b", {"JUDGE_URL": "http://127.0.0.1:8000"})
        assert judge_now.describe()["endpoint"] == judge_before.describe()["endpoint"] == \
            "http://127.0.0.1:8000/v1/chat/completions"
        assert judge_now.file_name == judge_before.file_name
        assert chat_url("HTTPS://Judge.Example/v1") == "https://judge.example/v1/chat/completions"
