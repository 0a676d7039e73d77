"""A local OpenAI-compatible server on 127.0.0.1 with scripted faults, for the clients that
share core/http.bounded_request: /v1/embeddings (tests/encoding/test_served.py),
/v1/chat/completions (tests/judging/test_assessor.py), and /v1/rerank in Cohere's protocol and
/rerank in text-embeddings-inference's (tests/encoding/test_served_rerank.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

URL_SECRET = "pw-0123456789-never-shown"  # the password and token of the redirect's URL
# what a faulty embeddings server puts in place of every number of the embeddings
VALUES = {"true": True, "string": "0.5", "null": None, "nested": [0.5], "1e39": 1e39,
          "nan": float("nan")}
EMBEDDINGS, CHAT = "/v1/embeddings", "/v1/chat/completions"
RERANK, TEI_RERANK = "/v1/rerank", "/rerank"  # Cohere's form (results[]), TEI's (a list)


class LocalServer(ThreadingHTTPServer):
    """/v1/embeddings (vectors by `encode`, then `transform`) and /v1/chat/completions (the
    reply's content by `answer`), for the model `name` only (another is a 404, as vLLM answers).
    Each request's body, path and Authorization are kept; the next of `faults` (or `always`)
    is applied to it. On either path: hold (the request numbered `hold_at` too: unanswered
    until `release` is set), drop (the connection closed unanswered), 400 (scripted), 401, 403,
    404, 413 and echo503 (an error echoing the Authorization header, as a careless server),
    429 (Retry-After: 2), long429 (Retry-After: 1000), 503, redirect (307 to a URL holding
    URL_SECRET), redirectkey (307 to a URL holding the key in its path), redirectrelative (307
    to a relative URL whose query holds URL_SECRET), notjson (a 200 that is not JSON, echoing
    the Authorization header), echoform (a 401 echoing it after `pad` characters, written
    by `form`: percent-encoded, HTML references, JSON escapes, UTF-16, ...);
    echo400 and echo400text (a 400 echoing the Authorization header after `pad` characters:
    a JSON error, plain text); trickle (a 200 of Content-Length 100,000 sent a byte every
    `trickle_every` seconds) and trickleheaders (its headers sent so).
    Embeddings: short (the last embedding left out), dim (one value fewer), reverse (the data
    in reverse order, indices kept), base64 (embeddings as strings), a VALUES name (every
    number that value), huge (`huge_size` bytes of numbers, chunked, without Content-Length).
    Chat: garbage (a reply that is no grade), echo (one that repeats the Authorization header),
    nochoices. Rerank (scores by `rank(query, documents)`): short (the last score left out),
    twice (index 0 given twice), reverse (the results in reverse order, indices kept), a
    VALUES name (every score that value). `url` is the server's address followed by `path`."""

    daemon_threads = True

    def __init__(self, name: str, encode: Callable[[list[str]], np.ndarray] | None = None,
                 answer: Callable[[dict], str] | None = None, path: str = "",
                 rank: Callable[[str, list[str]], np.ndarray] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.name, self.encode, self.answer, self.path = name, encode, answer, path
        self.rank = rank
        self.lock = threading.Lock()
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.authorizations: list[str | None] = []
        self.faults: list[str] = []
        self.always = ""
        self.hold_at: int | None = None  # the request (1-based) held unanswered
        self.in_flight = self.most_in_flight = 0  # requests being answered at once
        self.held, self.release = threading.Event(), threading.Event()
        self.huge_size = 0
        self.pad = 0  # characters before the Authorization header an echo repeats
        self.form: Callable[[str], bytes] = str.encode  # how echoform writes what it echoes
        self.trickle_every = 0.2  # seconds between the bytes of a trickled reply
        self.transform: Callable[[np.ndarray], np.ndarray] | None = None  # on every vector
        self.waits: list[float] = []  # the tests' counted retry waits

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{self.path}"

    @property
    def requests(self) -> list[list[str]]:
        """The inputs of each embeddings request, in order."""
        return [body["input"] for body, path in zip(self.bodies, self.paths, strict=True)
                if path == EMBEDDINGS]

    def texts(self) -> list[str]:
        return [text for inputs in self.requests for text in inputs]


@contextlib.contextmanager
def running(server: LocalServer) -> Iterator[LocalServer]:
    """`server` answering on a thread of its own until the block ends (a held request let go)."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def killed_when_held(server: LocalServer, args: list[str], stage: str) -> None:
    """`python -m pipeline *args` (this checkout's package) killed with SIGKILL once `server`
    holds its request numbered `hold_at` unanswered (the `stage` never reaching it fails the
    test), then the held request let go: what a run killed mid-request leaves behind."""
    process = subprocess.Popen([sys.executable, "-m", "pipeline", *args],
                               env={**os.environ, "PYTHONPATH": os.getcwd()},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert server.held.wait(120), f"the {stage} never reached the held request"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    server.release.set()


class Handler(BaseHTTPRequestHandler):
    server: LocalServer
    protocol_version = "HTTP/1.1"
    # a reply's headers and body are two writes: with Nagle's algorithm the body waited for
    # the client's delayed ACK of the headers, about 40 ms of each kept-alive request
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            self._answer(body)
        finally:
            with server.lock:
                server.in_flight -= 1

    def _answer(self, body: dict) -> None:
        server = self.server
        with server.lock:
            server.bodies.append(body)
            server.paths.append(self.path)
            server.authorizations.append(self.headers.get("Authorization"))
            fault = server.faults.pop(0) if server.faults else server.always
            if server.hold_at == len(server.bodies):
                fault = "hold"
        if fault == "hold":
            server.held.set()
            server.release.wait(60)
            return self._drop()
        if fault == "drop":
            return self._drop()
        said = "bad key: " + self.headers.get("Authorization", "")  # as a careless server
        if fault in ("401", "403", "404", "413", "echo503"):
            return self._send(int(fault[-3:]), {"error": {"message": said}})
        if fault in ("400", "429", "long429", "503"):
            wait = {"429": "2", "long429": "1000"}.get(fault)
            return self._send(int(fault[-3:]), {"error": {"message": f"scripted {fault}"}},
                              {"Retry-After": wait} if wait else {})
        if fault == "redirectkey":  # the key in the path of where it redirects
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            return self._send(307, {}, {"Location": f"http://elsewhere.invalid/steal/{key}/v1"})
        if fault == "redirectrelative":  # a signed link on the same host, relative
            return self._send(307, {}, {"Location": f"/v1/moved?X-Signature={URL_SECRET}"
                                                    f"#{URL_SECRET}"})
        if fault == "echoform":
            data = server.form("x" * server.pad + "Authorization: "
                               + self.headers.get("Authorization", ""))
            return self._send(401, data, {"Content-Type": "text/html"})
        if fault == "redirect":
            return self._send(307, {}, {"Location": f"http://user:{URL_SECRET}@elsewhere."
                                                    f"invalid{self.path}?token={URL_SECRET}"})
        echoed = "x" * server.pad + "Authorization: " + self.headers.get("Authorization", "")
        if fault == "echo400":
            return self._send(400, {"error": {"message": echoed, "code": 400}})
        if fault == "echo400text":
            return self._send(400, echoed, {"Content-Type": "text/plain"})
        if fault == "notjson":
            return self._send(200, f"<html>not an API: {'x' * server.pad}{said}</html>")
        if fault in ("trickle", "trickleheaders"):
            return self._trickle(fault == "trickleheaders")
        if self.path not in (EMBEDDINGS, CHAT, RERANK, TEI_RERANK):
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        if self.path == TEI_RERANK:  # TEI serves one model, whatever the request names
            return self._rerank(body, fault, "texts")
        if body.get("model") != server.name:
            return self._send(404, {"error": {"message": f"The model `{body.get('model')}` "
                                                         "does not exist."}})
        if self.path == EMBEDDINGS:
            return self._embeddings(body, fault)
        if self.path == RERANK:
            return self._rerank(body, fault, "documents")
        return self._chat(body, fault)

    def _rerank(self, body: dict, fault: str, field: str) -> None:
        """Each of the request's `field` scored for its query: Cohere's reply (results[] of
        {index, relevance_score}, best first) on RERANK, TEI's (a list of {index, score}) on
        TEI_RERANK; a request without the field a 422, as FastAPI and TEI answer."""
        server = self.server
        if not isinstance(body.get(field), list) or server.rank is None:
            return self._send(422, {"error": f"missing field `{field}`"})
        with server.lock:  # one model, one request at a time
            scores = [float(x) for x in server.rank(body["query"], body[field])]
        name = "relevance_score" if field == "documents" else "score"
        results = sorted(({"index": i, name: x} for i, x in enumerate(scores)),
                         key=lambda item: -item[name])
        if fault == "short":
            results = [item for item in results if item["index"] != len(scores) - 1]
        if fault == "twice":
            results = [item for item in results if item["index"] != 1] + \
                [item for item in results if item["index"] == 0]
        if fault == "reverse":
            results = results[::-1]
        if fault in VALUES:
            for item in results:
                item[name] = VALUES[fault]
        self._send(200, {"id": "r-1", "results": results, "meta": {}}
                   if field == "documents" else results)

    def _embeddings(self, body: dict, fault: str) -> None:
        server = self.server
        if body.get("encoding_format") != "float" or server.encode is None:
            return self._send(400, {"error": {"message": "give encoding_format float"}})
        if fault == "huge":
            return self._huge()
        with server.lock:  # one model, one request at a time
            vectors = server.encode(body["input"])
        if server.transform is not None:
            vectors = server.transform(vectors)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in enumerate(vectors)]
        if fault == "short":
            data = data[:-1]
        if fault == "dim":
            for item in data:
                item["embedding"] = item["embedding"][:-1]
        if fault == "reverse":
            data = data[::-1]
        if fault == "base64":
            for item in data:
                item["embedding"] = "AAAAAA=="
        if fault in VALUES:
            for item in data:
                item["embedding"] = [VALUES[fault]] * len(item["embedding"])
        tokens = sum(len(text.split()) for text in body["input"])
        self._send(200, {"object": "list", "data": data, "model": body["model"],
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _chat(self, body: dict, fault: str) -> None:
        if fault == "nochoices":
            return self._send(200, {"object": "chat.completion", "choices": []})
        said = "bad key: " + self.headers.get("Authorization", "")
        content = {"garbage": "The candidate seems quite relevant to me.",
                   "echo": f"I cannot grade this. {said}"}.get(fault)
        if content is None:
            if self.server.answer is None:
                return self._send(400, {"error": {"message": "no chat model here"}})
            content = self.server.answer(body)
        self._send(200, {"object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop", "message": {
                             "role": "assistant", "content": content}}]})

    def _send(self, status: int, reply: dict | str | bytes, headers: dict | None = None) -> None:
        data = reply if isinstance(reply, bytes) else \
            (reply if isinstance(reply, str) else json.dumps(reply)).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                           **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _huge(self) -> None:
        """A 200 reply whose data[] never ends before `huge_size` bytes, sent in chunks of
        1 MiB without a Content-Length (until the client hangs up)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b'{"object": "list", "data": [' + b'{"index": 0, "embedding": [' \
            + b"0.0123456789012345, " * (1 << 16)
        try:
            for _ in range(self.server.huge_size // len(chunk)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client hung up
            pass
        self._drop()

    def _trickle(self, headers: bool) -> None:
        """A 200 reply of Content-Length 100,000 sent a byte every `trickle_every` seconds
        (its headers too: `headers`), until the client hangs up or `release` is set."""
        server = self.server
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        if not headers:
            self.wfile.write(b"Content-Type: application/json\r\n"
                             b"Content-Length: 100000\r\n\r\n")
        try:
            for _ in range(100_000):
                self.wfile.write(b"X" if headers else b" ")
                self.wfile.flush()
                if server.release.wait(server.trickle_every):
                    break
        except OSError:  # the client hung up
            pass
        self._drop()

    def _drop(self) -> None:
        self.close_connection = True
        self.connection.close()


def one_line_error(call: Callable[[], object], bound: float = 120) -> Exception:
    """The one-line error (InputError) `call` raises, run on a thread: the test fails, rather
    than hangs, if it never ends (`bound`, generous: the short deadlines the tests give end
    it long before)."""
    from pipeline.core.errors import InputError

    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 (checked below)
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound)
    assert not thread.is_alive(), "the call never gave up"
    assert len(outcome) == 1 and isinstance(outcome[0], InputError), outcome
    assert "\n" not in str(outcome[0])
    return outcome[0]



class RawServer:
    """A server on 127.0.0.1 that answers each request with the bytes `reply(head)` gives
    (`head`: the request line and headers as sent), written as they are (a reply no HTTP
    server library would write: a header holding anything, 10,000 headers, no status line),
    then closes the connection. `heads` keeps each request's head; `url` is its address."""

    def __init__(self, reply: Callable[[bytes], bytes]) -> None:
        self.reply = reply
        self.heads: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):  # wakes the accept (a close alone does not)
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:  # closed: the block ended
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            data = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in data and (chunk := connection.recv(65536)):
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                while length and len(body) < int(length[1]) and (chunk := connection.recv(65536)):
                    body += chunk  # read whole, so that closing sends no reset
                self.heads.append(head)
                connection.sendall(self.reply(head))
                connection.shutdown(socket.SHUT_WR)


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def infinity(folder: Path | str, name: str) -> Iterator[str]:
    """infinity-emb (in its own environment: tests/conftest.install_infinity) serving the
    model `folder` as `name`, offline on 127.0.0.1 with the torch engine on the CPU: the
    server's address, once it answers; ended after."""
    import urllib.request

    from tests.conftest import install_infinity

    program = install_infinity() / "bin" / "infinity_emb"
    port = closed_port()
    server = subprocess.Popen(
        [str(program), "v2", "--model-id", str(folder), "--served-model-name", name,
         "--host", "127.0.0.1", "--port", str(port), "--engine", "torch", "--device", "cpu",
         "--no-model-warmup"],  # its warm-up batches: 7 to 8 CPU-s of a start of 11
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"})
    try:
        for _ in range(360):  # its start: torch and the weights loaded
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/models", timeout=2)
                break
            except OSError:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.wait(0.5)
                    raise AssertionError("infinity_emb v2 ended at its start") from None
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(60)
