"""The parts of one file's download taken alone (pipeline/ingest/s2client.py): an attempt that
resumes a partial file against hosts that answer a Range request in each way a host may, and
the bounded retry policy (which answers renew the link, when it gives up, what resets it).
tests/ingest/test_download.py runs them together against a whole Datasets API."""

from __future__ import annotations

import functools
import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline.core.errors import InputError
from pipeline.ingest.s2client import (
    BAD_DOWNLOADS,
    Attempt,
    Client,
    Links,
    Meter,
    Retries,
    Settings,
    Stopped,
    attempt,
    verified,
)

BODY = gzip.compress(b"".join(b'{"corpusid": %d}\n' % i for i in range(2000)), mtime=0)


class Host(BaseHTTPRequestHandler):
    """A file host serving BODY at /<how>, answering a Range request as `how` says: `ranges`
    (a 206 of the range asked for), `ignores` (a 200 of the whole file), `shifted` (a 206 of
    another range than asked for), `beyond` (416 to a range past the end)."""

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802  (the http.server name)
        start = int(self.headers.get("Range", "bytes=0-")[6:].rstrip("-"))
        how = self.path.strip("/")
        if how == "beyond" and start:
            self.send_response(416)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if how == "shifted" and start:
            start -= 1
        body = BODY if how == "ignores" or not start else BODY[start:]
        self.send_response(206 if start and how != "ignores" else 200)
        if start and how != "ignores":
            self.send_header("Content-Range", f"bytes {start}-{len(BODY) - 1}/{len(BODY)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Host)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def settings(retries: int = 3, backoff: float = 0.0) -> Settings:
    return Settings(base_url="http://127.0.0.1:9", key="k", retries=retries, backoff=backoff)


def test_an_attempt_appends_to_the_partial_only_when_the_host_sends_the_range_asked_for(
        host, tmp_path):
    client = Client(settings())
    for how in ("ranges", "ignores"):
        part = tmp_path / f".{how}.part"
        part.write_bytes(BODY[:1000])
        got = attempt(client, f"{host}/{how}", part, Meter())
        assert (got.status, got.total, got.note) == ((206 if how == "ranges" else 200),
                                                    len(BODY), "")
        assert got.whole(part.stat().st_size)
        assert part.read_bytes() == BODY  # ignored range: the whole file in place, not after
    for how in ("shifted", "beyond"):  # a range the host cannot give: from byte 0 next time
        part = tmp_path / f".{how}.part"
        part.write_bytes(BODY if how == "beyond" else BODY[:1000])
        got = attempt(client, f"{host}/{how}", part, Meter())
        assert not got.body and "from byte 0 again" in got.note
        assert not part.exists()


def test_an_attempt_with_stop_set_stops_and_keeps_its_bytes(host, tmp_path):
    part, stop = tmp_path / ".x.part", threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        attempt(Client(settings()), f"{host}/ranges", part, Meter(), stop)
    assert 0 < part.stat().st_size <= len(BODY) and BODY.startswith(part.read_bytes())


def test_a_whole_download_is_verified_before_it_takes_the_files_name(tmp_path):
    part, final = tmp_path / ".f.gz.part", tmp_path / "f.gz"
    part.write_bytes(BODY[:-8])  # the gzip stream without its end
    with pytest.raises(ValueError, match="not a whole gzip stream"):
        verified(part, final)
    assert not part.exists() and not final.exists()
    part.write_bytes(BODY)
    assert verified(part, final)["lines"] == 2000 and final.read_bytes() == BODY


def links() -> tuple[Links, list[int]]:
    asked: list[int] = []

    def listing() -> list[str]:
        asked.append(1)
        return ["https://files.example/release/f.gz?signature=s"]

    return Links(listing, "papers"), asked


@pytest.mark.parametrize("status, renewed", [(400, True), (401, True), (403, True),
                                             (429, False), (500, False), (503, False),
                                             (416, False), (None, False)])
def test_the_retry_policy_renews_the_link_only_when_the_host_refuses_it(status, renewed):
    table, asked = links()
    retries = Retries(settings(), "f.gz", "papers")
    _, generation = table.url(table.names()[0])
    retries.failed(Attempt(status, asked=0.0), "u", functools.partial(table.renew, generation))
    assert (len(asked) - 1, table.generation, retries.tries) == (int(renewed), int(renewed), 1)


def test_the_retry_policy_gives_up_after_its_tries_without_progress():
    retries = Retries(settings(retries=3), "f.gz", "papers", most=100)
    for _ in range(3):
        retries.failed(Attempt(503), "u", lambda: None)
    assert not retries.progressed(100)  # as many bytes as before: no progress
    assert retries.progressed(101)  # more than ever: counted again from 0
    for _ in range(3):
        retries.failed(Attempt(503), "u", lambda: None)
    with pytest.raises(InputError, match=r"papers file f\.gz: no progress after 4 tries "
                                         r"\(last: HTTP 503\)"):
        retries.failed(Attempt(503), "u", lambda: None)


def test_the_retry_policy_refuses_a_gone_file_at_once_and_damage_after_its_downloads():
    with pytest.raises(InputError, match="gone from the file host"):
        Retries(settings(), "f.gz", "papers").failed(Attempt(404), "u", lambda: None)
    retries = Retries(settings(), "f.gz", "papers")
    for _ in range(BAD_DOWNLOADS - 1):
        retries.damaged(ValueError("not a whole gzip stream"), "u")
    with pytest.raises(InputError, match=f"downloaded whole {BAD_DOWNLOADS} times"):
        retries.damaged(ValueError("not a whole gzip stream"), "u")


def test_the_retry_policy_stops_its_pause_when_told():
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):  # a pause of up to 60 s, cut short
        Retries(settings(backoff=60.0), "f.gz", "papers", stop=stop).failed(
            Attempt(503), "u", lambda: None)


def test_a_pause_asked_for_by_the_host_is_taken_only_from_a_rate_limit_or_server_error(
        monkeypatch):
    pauses: list[float] = []
    monkeypatch.setattr("pipeline.ingest.s2client.time.sleep", pauses.append)
    retries = Retries(settings(retries=9), "f.gz", "papers")
    for status in (429, 503, 403, None):
        retries.failed(Attempt(status, asked=7.0), "u", lambda: None)
    assert pauses == [7.0, 7.0, 0.0, 0.0]
