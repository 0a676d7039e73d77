"""The request loop the served embeddings' client and the judging chat client share
(pipeline/core/http.py) against the local server of tests/servers.py: no piece of the key
in any line or log line, whatever the padding before the key a server echoes and whatever
layer it wraps it in (FORMS); a redirect's Location shown without its query; a deadline
that holds while a reply trickles in; Ctrl-C ending a stage whose requests are unanswered;
JUDGE_CONCURRENCY bounded as EMBEDDINGS_CONCURRENCY is."""

from __future__ import annotations

import html
import html.entities
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.http import SAID, Words, each_at_once, refusal, said
from pipeline.core.secrets import redacted
from pipeline.encoding import served
from pipeline.encoding.served import EmbeddingsClient
from pipeline.judging import chat
from pipeline.judging.chat import ChatClient, chat_url
from pipeline.models import served_model
from tests.conftest import CHILD_BOUND_S
from tests.servers import (
    CHAT,
    EMBEDDINGS,
    URL_SECRET,
    LocalServer,
    RawServer,
    one_line_error,
    running,
)

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-QZ7HXW-K3Y9-VJ8Q"  # none of its pieces of 4 characters, in any case, is in other text
ESCAPED = "sk-QZ7HXW/K3Y9+VJ8Q=&x"  # a key that JSON, URLs and HTML escape
MODEL = "org/model-7b"
WORDS = Words("judge", "JUDGE api:org/model-7b at http://127.0.0.1:1/v1/chat/completions",
              "JUDGE_URL", "request", "a reply", "judge again", {}, "check the model")
OFFSETS = range(401)  # the characters before the key, each
NAMES = {char: name for name, char in sorted(html.entities.html5.items(), reverse=True)
         if len(char) == 1 and name.endswith(";")}  # a character's HTML named reference
# Each layer a server may wrap what it echoes in, every character of it (the 7th trial: a
# 401 echoing the key as &#115;&#107;&#45;... showed it whole, only &amp; was decoded)
FORMS = {
    "plain": str.encode,
    "percent": lambda text: "".join(f"%{byte:02X}" for byte in text.encode()).encode(),
    "html named": lambda text: "".join(f"&{NAMES[c]}" if c in NAMES else c
                                       for c in html.escape(text)).encode(),
    "html decimal": lambda text: "".join(f"&#{ord(c)};" for c in text).encode(),
    "html hex": lambda text: "".join(f"&#x{ord(c):x};" for c in text).encode(),
    "json": lambda text: "".join(f"\\u{ord(c):04x}" for c in text).encode(),
    "utf-16": lambda text: text.encode("utf-16"),
    "utf-16-be": lambda text: text.encode("utf-16-be"),
}


def pieces_in(text: str, key: str = KEY) -> list[str]:
    """The pieces of 4 or more characters of `key` that `text` holds, in any case, once what
    no terminal shows is left out and its percent, HTML and \\uXXXX escapes are undone (twice:
    an escape's escape; the pieces of 4 cover all)."""
    for _ in range(2):
        text = unquote(html.unescape(re.sub(r"\\u([0-9a-fA-F]{4})",
                                            lambda c: chr(int(c.group(1), 16)), text)))
    seen = "".join(char for char in text if char.isprintable() or char.isspace()).lower()
    return sorted({key[i:i + 4] for i in range(len(key) - 3)
                   if key[i:i + 4].lower() in seen})


def embeddings(texts: list[str]) -> np.ndarray:
    """The stand-in model's vectors: a constant direction per text's length."""
    return np.array([[1.0, len(text) % 7, 0.5, 0.25] for text in texts], dtype=np.float32)


def chat_client(server: LocalServer) -> ChatClient:
    return ChatClient(chat_url(server.url), MODEL, KEY)


def embeddings_client(server: LocalServer) -> EmbeddingsClient:
    return EmbeddingsClient(served_model(f"api:{MODEL}", {"EMBEDDINGS_URL": server.url}), KEY)


def echoed(offset: int) -> str:
    return "x" * offset + f"Authorization: Bearer {KEY}"


# ---- no piece of the key in a line, wherever it falls -------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_no_piece_of_the_key_is_shown_whatever_the_padding_before_it(form):
    """A 400 reply echoing the Authorization header after 0 to 400 characters, as text and as
    a JSON error, and a 200 reply that is neither an embeddings list nor a chat completion
    echoing it so, each written in `form` (every character percent-encoded, an HTML named,
    decimal or hex reference, a JSON escape; UTF-16): the line of each client names the status
    or the reply, never 4 characters of the key in a row (the body was once cut to 200
    characters before the key was hidden: 'Bearer sk-HOSTILE-JU' after 180 characters)."""
    write = FORMS[form]
    with running(LocalServer(MODEL, path=EMBEDDINGS)) as server:
        clients = (embeddings_client(server), chat_client(server))
    leaks = {}
    for offset in OFFSETS:
        text = echoed(offset)
        error = json.dumps({"error": {"message": text, "type": "BadRequestError"}})
        lines = [refusal(400, write(text), KEY, WORDS),
                 refusal(400, write(error), KEY, WORDS)]
        for client in clients:
            with pytest.raises(InputError) as raised:
                client._json(write(f"<html>not an API: {text}</html>"))
            lines.append(str(raised.value))
        for line in lines:
            assert "\n" not in line and len(line) < 600, line
            if pieces_in(line):
                leaks[offset] = line
    assert not leaks, list(leaks.items())[:3]
    assert refusal(400, echoed(5).encode(), KEY, WORDS).endswith(
        "it answered 400 (xxxxxAuthorization: Bearer <key>): check the model")


@pytest.mark.parametrize("path, call", [
    (EMBEDDINGS, lambda server: embeddings_client(server).encode(["a paper"])),
    (CHAT, lambda server: chat_client(server).complete(
        [{"role": "user", "content": "grade"}], 0.0, 10)),
])
def test_each_client_shows_no_piece_of_the_key_end_to_end(path, call, caplog):
    """The same through the local server, at offsets around the 200-character cut, for the
    embeddings and the chat client: the one line raised and the log hold no piece of it."""
    said_lines = []
    with running(LocalServer(MODEL, path=path)) as server, caplog.at_level(logging.DEBUG):
        for offset in (0, 1, 150, 170, 179, 180, 181, 185, 190, 199, 200, 201, 250, 400):
            for fault in ("echo400", "echo400text", "notjson"):
                server.faults, server.pad = [fault], offset
                with pytest.raises(InputError) as raised:
                    call(server)
                said_lines.append(str(raised.value))
    assert server.authorizations[-1] == f"Bearer {KEY}"  # the key was sent, and echoed
    assert all("<key>" in line or "x" * 150 in line for line in said_lines)
    for text in (*said_lines, caplog.text):
        assert not pieces_in(text), text


@pytest.mark.parametrize("path, call", [
    (EMBEDDINGS, lambda server: embeddings_client(server).encode(["a paper"])),
    (CHAT, lambda server: chat_client(server).complete(
        [{"role": "user", "content": "grade"}], 0.0, 10)),
])
def test_each_client_shows_no_piece_of_a_key_echoed_in_any_form_end_to_end(path, call, caplog):
    """A 401 echoing the Authorization header in each of FORMS (its whole text so written),
    through the local server, at offsets around the 200-character cut: the one line raised
    (it answered 401, the hint) and the log hold no piece of the key."""
    lines = []
    with running(LocalServer(MODEL, path=path)) as server, caplog.at_level(logging.DEBUG):
        for form, write in FORMS.items():
            for offset in (0, 1, 170, 179, 180, 181, 199, 200, 201):
                server.faults, server.pad, server.form = ["echoform"], offset, write
                with pytest.raises(InputError, match="it answered 401 ") as raised:
                    call(server)
                lines.append((form, str(raised.value)))
    assert server.authorizations[-1] == f"Bearer {KEY}"
    leaks = [(form, line) for form, line in lines if pieces_in(line)]
    assert not leaks, leaks[:3]
    assert not pieces_in(caplog.text)


@pytest.mark.parametrize("path, call", [
    (EMBEDDINGS, lambda server: embeddings_client(server).encode(["a paper"])),
    (CHAT, lambda server: chat_client(server).complete(
        [{"role": "user", "content": "grade"}], 0.0, 10)),
])
def test_a_relative_redirect_is_shown_without_its_query(path, call):
    """A 307 to a relative Location whose query and fragment hold a signature (once shown
    whole: only absolute URLs passed shown_url): the line names where it points, resolved
    against the endpoint, as an absolute one is shown (?<query>, #<fragment>)."""
    with running(LocalServer(MODEL, path=path)) as server:
        server.faults = ["redirectrelative"]
        with pytest.raises(InputError) as raised:
            call(server)
        host = server.url.removesuffix(path)
    line = str(raised.value)
    assert f"a redirect to {host}/v1/moved?<query>#<fragment> (not followed)" in line, line
    assert URL_SECRET not in line and "X-Signature" not in line


@pytest.mark.parametrize("key", [KEY, ESCAPED])
@pytest.mark.parametrize("echo", [
    "Bearer {key}", "Bearer {cut}", "key {masked}",  # whole, cut short, masked
    "Bearer {broken}", "{unseen}", "{utf16}",  # across a line break, a zero-width space, NULs
    "{lower}", "{upper}", "Bearer%20{percent}", "{html}", "{json}",  # in another case, escaped
    "bad key: {pieces}",  # cut pieces in two cases (the hostile trial's S6)
    "http://elsewhere.invalid/steal/{bytewise}/v1", "{unicode}",  # every character escaped
    "http://user:" + URL_SECRET + "@elsewhere.invalid/v1?token=" + URL_SECRET,
])
def test_every_form_of_the_key_a_server_may_echo_is_replaced(echo, key):
    """The key whole, cut, masked, across a line break or an invisible character, in UTF-16's
    NULs, in another case, percent-, HTML- or JSON-escaped (a key with '/', '+', '=', '&'); a
    URL's password and token: replaced in an error's JSON message, in a text and in a
    reply's content kept whole."""
    echo = echo.format(key=key, cut=key[:13], masked=f"{key[:6]}...{key[-4:]}",
                       broken=f"{key[:9]}\n{key[9:]}", unseen=f"{key[:9]}\u200b{key[9:]}",
                       utf16=key.encode("utf-16-le").decode(), lower=key.lower(),
                       upper=key.upper(), percent=quote(key, safe=""), html=html.escape(key),
                       json=json.dumps(key)[1:-1].replace("/", "\\/"),
                       pieces=f"{key[:11].upper()}... and {key[5:16].lower()}",
                       bytewise="".join(f"%{byte:02x}" for byte in key.encode()),
                       unicode="".join(f"\\u{ord(char):04X}" for char in key))
    for data in (json.dumps({"error": {"message": echo}}).encode(), echo.encode(),
                 json.dumps({"detail": [{"msg": echo}]}).encode(),
                 ("<html>" + echo + "</html>").encode("utf-16")):
        line = said(data, key)
        assert not pieces_in(line, key) and URL_SECRET not in line, line
    content = redacted(f"The grade is 2. {echo} Thanks.", key)
    assert not pieces_in(content, key) and URL_SECRET not in content, content
    assert content.startswith("The grade is 2. ") and content.endswith(" Thanks.")


def test_a_long_message_is_cut_after_its_key_is_replaced():
    """A key straddling the cut of a long message, and a 20 MB reply: one line of SAID
    characters at most, the key's first characters never left at its end."""
    for offset in range(SAID - 30, SAID + 5):
        line = said((" " * 5000 + "y" * offset + KEY + " tail").encode(), KEY)
        assert len(line) <= SAID and not pieces_in(line), line
    big = ("[" + "0.5, " * 4_000_000 + KEY).encode()
    assert said(big, KEY).startswith("[0.5, 0.5,")


@pytest.mark.parametrize("path, call", [
    (EMBEDDINGS, lambda server: embeddings_client(server).encode(["a paper"])),
    (CHAT, lambda server: chat_client(server).complete(
        [{"role": "user", "content": "grade"}], 0.0, 10)),
])
def test_a_redirect_to_a_url_holding_the_key_shows_none_of_it(path, call):
    """A redirect whose Location holds the key in its path (the hostile trial's S5: the whole
    key was shown, the target passing shown_url only): the line names the redirect, the key
    replaced."""
    with running(LocalServer(MODEL, path=path)) as server:
        server.faults = ["redirectkey"]
        with pytest.raises(InputError) as raised:
            call(server)
    line = str(raised.value)
    assert "a redirect to http://elsewhere.invalid/steal/<key>" in line, line
    assert not pieces_in(line), line


# ---- the deadline holds while a reply arrives ---------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("fault", ["trickle", "trickleheaders"])
def test_a_reply_sent_a_byte_at_a_time_is_given_up_at_the_deadline(monkeypatch, fault):
    """A 200 of Content-Length 100,000 sent a byte every 0.2 s (each byte restarts the
    socket's read timeout, so it once never ended: still running at 700 s), and one whose
    headers come so: with a deadline of 1 s, each client gives up in one line naming it."""
    monkeypatch.setattr(served, "DEADLINE", 1.0)
    monkeypatch.setattr(chat, "DEADLINE", 1.0)
    with running(LocalServer(MODEL, path=EMBEDDINGS)) as server:
        server.always = fault
        line = str(one_line_error(lambda: embeddings_client(server).encode(["a paper"])))
        assert line.startswith(f"MODEL api--org--model-7b at {server.url}: gave up after the "
                               "1 s a batch may take, "), line
        assert line.endswith("(1 attempt): check the server, then embed again (the papers "
                             "stored so far are kept)"), line
    with running(LocalServer(MODEL, path=CHAT)) as server:
        server.always = fault
        line = str(one_line_error(lambda: chat_client(server).complete([], 0.0, 10)))
        assert line.startswith(f"JUDGE api:{MODEL} at {server.url}: gave up after the 1 s "
                               "a request may take, "), line
    late = "its reply still arriving" if fault == "trickle" else "no reply yet"
    assert late in line and len(server.bodies) == 1


# ---- Ctrl-C ends a stage whose requests are unanswered --------------------------------------
INTERRUPTED = """
import sys
from pathlib import Path

import polars as pl

from pipeline.encoding import served
from pipeline.judging import judgments as judging
from pipeline.judging.assessor import assessor
from pipeline.judging.judgments import PAIR_TEXTS
from pipeline.models import served_model

kind, url, log_path = sys.argv[1], sys.argv[2], Path(sys.argv[3])
if kind == "judge":
    frame = pl.DataFrame({"query": [str(q) for q in range(8)],
                          "doc": [str(100 + q) for q in range(8)],
                          **{column: [f"{column} {q}" for q in range(8)]
                             for column in PAIR_TEXTS}})
    judging.judge(frame, assessor("api:org/model-7b", {"JUDGE_URL": url}), log_path,
                  concurrency=4, progress=False)
else:
    encoder = served.ServedEncoder(served_model("api:org/model-7b", {
        "EMBEDDINGS_URL": url, "EMBEDDINGS_BATCH": "2", "EMBEDDINGS_CONCURRENCY": "4"}))
    encoder.encode_ids([f"paper {i}" for i in range(16)], progress=False)
"""


@pytest.mark.parametrize("kind, path, answered, held", [
    ("judge", CHAT, 0, 4),  # 4 pairs asked at once
    ("embed", EMBEDDINGS, 2, 4),  # the probes answered, then 4 batches at once
    ("embed", EMBEDDINGS, 0, 1),  # the first probe: one request, from the main thread
])
def test_ctrl_c_ends_a_stage_whose_requests_are_never_answered(
        tmp_path, kind, path, answered, held):
    """Requests to a server that never answers (`make judge` once ran on 200 s after Ctrl-C,
    its threads waiting for their requests, the main thread for them): SIGINT once they are
    held, and the process ends (KeyboardInterrupt), the requests left behind. The test's own
    bound is 60 s; each request would wait 300 s (600 s a batch)."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    with running(LocalServer(MODEL, encode=embeddings, path=path)) as server:
        server.faults, server.always = [""] * answered, "hold"
        process = subprocess.Popen(
            [sys.executable, str(script), kind, server.url, str(tmp_path / "log.jsonl")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY})
        try:
            for _ in range(1200):  # every request sent and held
                if server.in_flight >= held or process.poll() is not None:
                    break
                time.sleep(0.05)
            time.sleep(0.3)  # more would be sent now, if they were to be
            assert server.in_flight == held and process.poll() is None
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode not in (0, None) and "KeyboardInterrupt" in err, err[-2000:]
    assert not pieces_in(err)


def test_each_at_once_keeps_order_and_stops_at_a_failure():
    """Items in their order whatever order they end in; after a failure no further item
    starts, the running ones end (their work kept), and the failure is raised in its place."""
    ended: list[int] = []

    def work(i: int) -> int:
        time.sleep(0.01 * (5 - i % 5))
        if i == 6:
            raise InputError("item 6")
        ended.append(i)
        return i * i

    assert list(each_at_once(work, range(6), 3)) == [i * i for i in range(6)]
    ended.clear()
    got = []
    with pytest.raises(InputError, match="item 6"):
        for value in each_at_once(work, range(40), 3):
            got.append(value)
    assert got == [i * i for i in range(6)]
    assert max(ended) < 6 + 3 and len(ended) < 40 - 1


# ---- JUDGE_CONCURRENCY's bound --------------------------------------------------------------
def test_judge_concurrency_is_bounded_as_embeddings_concurrency_is(tmp_path):
    """JUDGE_CONCURRENCY=1000000000 (once accepted: a thread per request) is refused in one
    line, by the API and by make, before anything runs; 64, EMBEDDINGS_CONCURRENCY's bound,
    is the most."""
    data = pipeline.Data(tmp_path / "data")
    for value in (10**9, 65, 0):
        with pytest.raises(InputError, match=rf"concurrency={value}") as refused:
            pipeline.judge(data, "c", "bm25", "standin:0", judge_concurrency=value)
        assert "\n" not in str(refused.value)
    assert "use at most 64 (requests at once, as EMBEDDINGS_CONCURRENCY)" in str(
        pytest.raises(InputError, pipeline.judge, data, "c", "bm25", "standin:0",
                      judge_concurrency=10**9).value)
    (tmp_path / "stamp").touch()
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", f"DATA={tmp_path / 'data'}", "CORPUS=c",
         f"PY={sys.executable}", f"STAMP={tmp_path / 'stamp'}", "judge", "MODELS=bm25",
         "JUDGE=standin:0", "JUDGE_CONCURRENCY=1000000000"],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")})
    from tests.conftest import refusal as make_refusal

    line = make_refusal(done)
    assert "JUDGE_CONCURRENCY" in line and "at most 64" in line, line


# ---- the rule: every text a server sends passes the one redaction, for every client ---------
def _reply(status: str, headers: list[bytes], body: bytes = b"") -> bytes:
    """A raw reply: the status line, `headers` as written, a Content-Length unless given, and
    Connection: close (RawServer closes it: the client reuses none, which would race)."""
    if not any(h.lower().startswith((b"content-length:", b"transfer-encoding:")) for h in headers):
        headers = [*headers, b"Content-Length: %d" % len(body)]
    return b"\r\n".join([f"HTTP/1.1 {status}".encode(), *headers, b"Connection: close", b"",
                          body])


# Each place a server's text reaches the client, as a raw reply holding `e` (the key, written
# in one of FORMS) there: every header the client reads (a number it only parses included),
# one that is not a header, the status line's reason, and every field of a body it shows.
SERVER_TEXTS = {
    "reason": lambda e: _reply("503 " + e.decode("latin-1"), []),
    "Retry-After 429": lambda e: _reply("429 Too Many Requests", [b"Retry-After: " + e]),
    "Retry-After 503": lambda e: _reply("503 Unavailable", [b"Retry-After: " + e]),
    "Location": lambda e: _reply("307 Moved", [b"Location: /moved/" + e + b"/v1"]),
    "Content-Type": lambda e: _reply("200 OK", [b"Content-Type: " + e], b"<html>no</html>"),
    "Content-Length": lambda e: _reply("200 OK", [b"Content-Length: " + e], b"{}"),
    "Content-Encoding": lambda e: _reply("200 OK", [b"Content-Encoding: gzip, " + e], b"{}"),
    "Transfer-Encoding": lambda e: _reply("200 OK", [b"Transfer-Encoding: " + e], b"{}"),
    "Content-Range": lambda e: _reply("206 Partial", [b"Content-Range: bytes " + e], b"{}"),
    "no header": lambda e: _reply("200 OK", [e], b"{}"),
    "HTTP/0.9": lambda e: e,
    "error.message": lambda e: _reply("401 No", [], b'{"error": {"message": "%s"}}' % e),
    "error": lambda e: _reply("400 No", [], b'{"error": "%s"}' % e),
    "message": lambda e: _reply("404 No", [], b'{"message": "%s"}' % e),
    "detail": lambda e: _reply("422 No", [], b'{"detail": ["%s"]}' % e),
    "body": lambda e: _reply("200 OK", [b"Content-Type: text/plain"], e),
}
HEADER_FORMS = ("plain", "percent", "html decimal", "html hex", "json")  # a header's bytes


def _clients(url: str, folder: Path) -> dict[str, Callable[[], object]]:
    """Each client of core/http.py against `url`: the judge's and the embeddings' requests,
    the Datasets API's (its key in x-api-key) and a file link's (S2's, which carries none)."""
    from pipeline.ingest.s2client import Client, Links, Meter, Settings, fetch_file

    s2 = Client(Settings(base_url=url, key=KEY, retries=1, backoff=0.0))
    links = Links(lambda: [f"{url}/files/f.gz"], "papers", s2.secrets)
    return {
        "judge": lambda: ChatClient(f"{url}/v1/chat/completions", MODEL, KEY).complete(
            [{"role": "user", "content": "grade"}], 0.0, 10),
        "embeddings": lambda: EmbeddingsClient(served_model(
            f"api:{MODEL}", {"EMBEDDINGS_URL": f"{url}/v1/embeddings"}), KEY).encode(["a"]),
        "Datasets API": lambda: s2.get_json("/release/", "list of releases"),
        "S2 file": lambda: fetch_file(s2, links, "f.jsonl.gz", folder, Meter(), "papers"),
    }


@pytest.mark.parametrize("place", SERVER_TEXTS)
def test_no_byte_of_the_key_from_any_header_or_field_a_server_sends(place, monkeypatch,
                                                                     tmp_path, caplog):
    """The 8th trial: a 429 echoing the Authorization header in its Retry-After was printed
    whole ("an invalid Retry-After ('Bearer sk-...', ignored)"). The rule: whatever a server
    sends that the client reads (each header, the status line, each field of a body) passes
    core/secrets.redacted before it is in a line or a log line. A server echoing the key in
    `place`, written in each form a server may wrap it in, to the judge, the embeddings
    client, the Datasets API and a file link: the line each raises (or what it returns) and
    every log line, urllib3's own included, hold no 4 characters of the key in a row."""
    monkeypatch.setattr(chat, "pause", lambda seconds: None)
    monkeypatch.setattr(served, "pause", lambda seconds: None)
    forms = FORMS if place in ("HTTP/0.9", "body") else {f: FORMS[f] for f in HEADER_FORMS}
    shown, sent = [], 0
    for form, write in forms.items():
        echo = write(f"Bearer {KEY}")
        if place in ("error.message", "error", "message", "detail") and form == "plain":
            echo = json.dumps(f"Bearer {KEY}")[1:-1].encode()
        with RawServer(lambda head, e=echo: SERVER_TEXTS[place](e)) as server, \
                caplog.at_level(logging.DEBUG):
            for name, call in _clients(server.url, tmp_path).items():
                try:
                    outcome = repr(call())
                except InputError as exc:
                    outcome = str(exc)
                shown.append((form, name, outcome))
            sent += len(server.heads)
    assert sent >= 4 * len(forms)  # every client asked, and was answered so
    leaks = [(form, name, line) for form, name, line in shown if pieces_in(line)]
    assert not leaks, leaks[:3]
    assert not pieces_in(caplog.text), caplog.text[-3000:]


# ---- what went wrong, in words: a malformed reply, a long Retry-After, a redirect not followed
MALFORMED = {
    "more than 100 headers": _reply("200 OK", [b"X-A: b"] * 10_000, b"{}"),
    "a header line longer than 65,536 bytes": _reply("200 OK", [b"X-A: " + b"a" * (1 << 20)],
                                                     b"{}"),
    "no HTTP status line: an HTTP/0.9 reply": b'{"data": []}',
    "an HTTP version other than 1.0 and 1.1": b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
}


@pytest.mark.parametrize("wrong", MALFORMED)
def test_a_malformed_reply_is_said_as_such_and_not_sent_again(wrong, tmp_path):
    """A reply of 10,000 headers, a 1 MB header, an HTTP/0.9 answer was "the connection
    failed (ProtocolError)", sent again 5 times. A malformed reply is the server's doing, the
    same at each attempt: each client says what was wrong with it, in one line, after its one
    request."""
    with RawServer(lambda head: MALFORMED[wrong]) as server:
        for name, call in _clients(server.url, tmp_path).items():
            asked = len(server.heads)
            line = str(one_line_error(call))
            said = "its host answered a malformed reply" if name == "S2 file" else \
                "its reply is malformed"
            assert f"{said} ({wrong}" in line and "which no retry changes" in line, line
            assert "ProtocolError" not in line and "connection failed" not in line
            assert len(server.heads) == asked + 1, name  # asked once


def test_a_retry_after_longer_than_the_longest_wait_is_said_so_not_called_invalid(
        monkeypatch, tmp_path, caplog):
    """A valid Retry-After of 1,000,000,000,000 s was "an invalid Retry-After (ignored)": it
    is said as what it is, longer than the most the client waits, and each wait is that."""
    waits: list[float] = []
    for module in (chat, served):
        monkeypatch.setattr(module, "pause", waits.append)
    monkeypatch.setattr("pipeline.ingest.s2client.time.sleep", waits.append)
    reply = _reply("429 Too Many Requests", [b"Retry-After: 1000000000000"])
    with RawServer(lambda head: reply) as server, caplog.at_level(logging.WARNING):
        lines = {name: str(one_line_error(call))
                 for name, call in _clients(server.url, tmp_path).items()}
    for name, most in (("judge", chat.MAX_WAIT), ("embeddings", served.MAX_WAIT),
                       ("Datasets API", 120), ("S2 file", 120)):
        assert ("asking for a wait of 1,000,000,000,000 s (Retry-After; more than the "
                f"{most:g} s the client waits at most)") in lines[name], lines[name]
    assert "invalid" not in caplog.text and "invalid" not in " ".join(lines.values())
    assert waits and set(waits) <= {chat.MAX_WAIT, served.MAX_WAIT, 120.0}


@pytest.mark.parametrize("location, words, asked", [
    ("{url}/files/f.gz", "a redirect loop: back to a link it redirected from", 1),
    ("/files/../files/f.gz", "a redirect loop", 1),
    ("file:///etc/passwd", "a redirect to a file: link (file:///etc/passwd; only http and "
                           "https are followed)", 1),
    ("http+unix://%2Fvar%2Frun%2Fdocker.sock/f.gz", "a redirect to a http+unix: link", 1),
    ("/hop/{n}", "more than 5 redirects in a row", 6),
])
def test_a_file_link_redirecting_in_a_loop_or_elsewhere_than_http_is_named_at_once(
        location, words, asked, tmp_path):
    """A file link that redirects to itself, to file:// or to a unix socket ended "no progress
    after 3 tries (last: HTTP 302); run again later": it names the loop, the scheme refused
    or the redirects too many, at once (no retry changes where a link leads)."""
    hops: list[bytes] = []

    def reply(head: bytes) -> bytes:
        hops.append(head)
        target = location.format(url=server.url, n=len(hops)).encode()
        return _reply("302 Found", [b"Location: " + target])

    with RawServer(reply) as server:
        line = str(one_line_error(_clients(server.url, tmp_path)["S2 file"]))
    assert line.startswith(f"papers file f.jsonl.gz ({server.url}/files/f.gz): its host "
                           "answered HTTP 302"), line
    assert words in line and line.endswith("which no retry changes; run again later (or "
                                           "report it to Semantic Scholar)"), line
    assert len(hops) == asked
