"""A local Semantic Scholar Datasets API on 127.0.0.1 for the download tests.

It speaks the documented protocol (GET /datasets/v1/release/, /release/{id} with `latest`,
/release/{id}/dataset/{name} with presigned file links for the x-api-key, /diffs/{start}/to/
{end}/{name}) and serves the files with HTTP ranges, the way the file host does. The faults a
real download meets can be switched on: 429 with Retry-After, a body broken off before its
Content-Length, a file whose bytes are damaged once, links that expire, a slow host, a host
trickling its answers a byte at a time, a refusal echoing the key.

The releases hold small S2AG records (papers, abstracts, citations), made from a seed; each
release after the first changes some records, deletes some and adds some, and the diffs
between two releases are computed from the records, as S2 publishes them.
"""

from __future__ import annotations

import gzip
import json
import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

KEY = "test-key-7f3a"  # the key the server accepts
DATASETS = ("papers", "abstracts", "citations")
KEYS = {"papers": "corpusid", "abstracts": "corpusid", "citations": "citationid"}
FIELDS = ("Medicine", "Biology", "Computer Science", "Physics", "Chemistry")
WORDS = ("cell protein network model graph learning quantum field reaction enzyme patient "
         "trial theory energy signal brain tumor gene data method").split()


def _paper(rng: random.Random, cid: int, version: int) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS) for _ in range(8))
    return {"corpusid": cid, "title": f"{words} v{version}",
            "year": rng.choice([None, *range(1990, 2025)]) if rng.random() < 0.05
            else rng.randrange(1990, 2025),
            "s2fieldsofstudy": [{"category": rng.choice(FIELDS), "source": "external"}],
            "citationcount": rng.randrange(0, 40), "referencecount": rng.randrange(0, 40),
            "externalids": {"DOI": f"10.1/{cid}"}, "padding": f"{rng.getrandbits(320):080x}"}


def _abstract(rng: random.Random, cid: int, version: int) -> dict[str, Any]:
    text = " ".join(rng.choice(WORDS) for _ in range(40))
    return {"corpusid": cid, "abstract": f"{text} (version {version})"}


def build_releases(ids: tuple[str, ...] = ("2026-11-04", "2026-11-11", "2026-11-18"),
                   n_papers: int = 400, seed: int = 0) -> dict[str, dict[str, list[dict]]]:
    """Each release's records per dataset: the first made from the seed, each next one with
    about 8% of papers and abstracts changed, 5% deleted, 10% added, citations likewise."""
    rng = random.Random(seed)
    papers = {cid: _paper(rng, cid, 0) for cid in range(1, n_papers + 1)}
    abstracts = {cid: _abstract(rng, cid, 0) for cid in papers if rng.random() < 0.8}
    citations: dict[int, dict] = {}
    next_cite = 1

    def add_citations(count: int) -> None:
        nonlocal next_cite
        ids_ = sorted(papers)
        for _ in range(count):
            citing, cited = rng.choice(ids_), rng.choice(ids_)
            cited_value = None if rng.random() < 0.03 else cited
            citations[next_cite] = {"citationid": next_cite, "citingcorpusid": citing,
                                    "citedcorpusid": cited_value, "isinfluential": False}
            next_cite += 1

    add_citations(n_papers * 5)
    out: dict[str, dict[str, list[dict]]] = {}
    next_paper = n_papers + 1
    for version, release in enumerate(ids):
        if version:
            for cid in rng.sample(sorted(papers), len(papers) // 12):
                papers[cid] = _paper(rng, cid, version)
            for cid in rng.sample(sorted(papers), len(papers) // 20):
                del papers[cid]
                abstracts.pop(cid, None)
            for _ in range(len(papers) // 10):
                papers[next_paper] = _paper(rng, next_paper, version)
                abstracts[next_paper] = _abstract(rng, next_paper, version)
                next_paper += 1
            for cid in rng.sample(sorted(abstracts), len(abstracts) // 12):
                abstracts[cid] = _abstract(rng, cid, version)
            for key in rng.sample(sorted(citations), len(citations) // 20):
                del citations[key]
            add_citations(len(citations) // 10)
        records = {"papers": list(papers.values()), "abstracts": list(abstracts.values()),
                   "citations": list(citations.values())}
        out[release] = {name: [dict(r) for r in rng.sample(rows, len(rows))]
                        for name, rows in records.items()}  # each release in its own order
    return out


def gz(records: list[dict]) -> bytes:
    return gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode(), mtime=0)


def split(records: list[dict], parts: int) -> list[list[dict]]:
    size = -(-len(records) // parts) if records else 0
    return [records[i * size:(i + 1) * size] for i in range(parts)]


@dataclass
class Faults:
    """What goes wrong, each counted down as it happens."""

    rate_limit: int = 0  # the next N requests answer 429 (Retry-After: `retry_after`)
    retry_after: str = "1"  # the Retry-After of a 429 (the tests also send invalid ones)
    file_rate_limit: int = 0  # the next N file requests answer 429 (Retry-After: `retry_after`)
    server_errors: int = 0  # the next N requests answer 503
    truncate: dict[str, int] = field(default_factory=dict)  # file name -> times broken off
    corrupt: dict[str, int] = field(default_factory=dict)  # file name -> times damaged
    throttle: float = 0.0  # seconds of sleep per 4 KiB of a file's body
    expire_after: int = 0  # links expire after this many file requests each (0: never)
    expire_next: int = 0  # the next N file requests find their link expired
    overstate: dict[str, int] = field(default_factory=dict)  # file name -> bytes the
    # Content-Length claims beyond the body (the body is sent whole, then the connection ends)
    redirect_to: str = ""  # a base URL: file links answer 307 to the same file there (the
    # same server under another host name, such as http://localhost:<port>)
    hang_api: int = 0  # the next N API requests are accepted and never answered
    # What a hostile server sends in place of the real values (the path-traversal tests):
    release_id: str | None = None  # the release answer's release_id
    step_release: str | None = None  # the release between the diffs' first two steps
    file_name: str | None = None  # the last part of the first file link of each listing
    dataset: str | None = None  # a further dataset the release offers (papers' files)
    # A host trickling: the next N API answers, or every file's ("body" or "headers"), a 200
    # of Content-Length 100,000 sent a byte every `trickle_every` seconds (its headers too)
    trickle_api: int = 0
    trickle_files: str = ""
    trickle_every: float = 0.2
    echo: Callable[[str], bytes] | None = None  # keyed calls refused 401, the body echo(key)


class S2Server:
    """The server: `url` its base (S2_API_URL), `files[path] = bytes`, `log` what was asked."""

    def __init__(self, releases: dict[str, dict[str, list[dict]]], parts: int = 3):
        self.releases = releases
        self.faults = Faults()
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.tokens: dict[str, int] = {}  # token -> file requests made with it (-1: expired)
        self.files: dict[str, bytes] = {}
        self.listing: dict[tuple[str, str], list[str]] = {}
        for release, datasets in releases.items():
            for name, records in datasets.items():
                paths = []
                for k, chunk in enumerate(split(records, parts)):
                    path = f"{release}/{name}/{20261100 + k}_{k:05d}_{name}_part{k}.gz"
                    self.files[path] = gz(chunk)
                    paths.append(path)
                self.listing[(release, name)] = paths
        self.diff_files: dict[tuple[str, str, str], dict[str, list[str]]] = {}
        ids = sorted(releases)
        for start, end in zip(ids, ids[1:], strict=False):
            for name in DATASETS:  # the datasets with diffs (a release may hold others)
                self.diff_files[(start, end, name)] = self._diff(start, end, name)
        self.stopping = threading.Event()  # set on exit: a hanging request ends
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # a poll every 0.05 s: shutdown() waits for the next (serve_forever's own: 0.5 s)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)

    def _diff(self, start: str, end: str, name: str) -> dict[str, list[str]]:
        key = KEYS[name]
        old = {r[key]: r for r in self.releases[start][name]}
        new = {r[key]: r for r in self.releases[end][name]}
        updates = [r for k, r in new.items() if old.get(k) != r]
        deletes = [{key: k} for k in old if k not in new]
        out: dict[str, list[str]] = {"update_files": [], "delete_files": []}
        for kind, records, parts in (("update_files", updates, 2), ("delete_files", deletes, 1)):
            for k, chunk in enumerate(split(records, parts)):
                path = f"diffs/{start}_{end}/{name}/{kind}/{kind}_{k}.gz"
                self.files[path] = gz(chunk)
                out[kind].append(path)
        return out

    def __enter__(self) -> S2Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def link(self, path: str, first: bool = False) -> str:
        """A presigned link to `path`; the first of a listing named `faults.file_name` when a
        hostile name is set (the server finds the file by the path before that name)."""
        token = secrets.token_hex(8)
        with self.lock:
            self.tokens[token] = 0
        hostile = self.faults.file_name
        tail = f"/{quote(hostile, safe='')}" if first and hostile is not None else ""
        moved = "/moved" if self.faults.redirect_to else ""  # answered 307 to redirect_to
        return (f"{self.url}{moved}/files/{path}{tail}?X-Amz-Expires=3600&"
                f"X-Amz-Signature={token}")

    def expire_links(self) -> None:
        with self.lock:
            for token in self.tokens:
                self.tokens[token] = -1

    def requests(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.log if r["kind"] == kind]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body are two writes: with Nagle's algorithm the body waited for the
            # client's delayed ACK of the headers, about 40 ms of each kept-alive request
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def reply(self, status: int, body: bytes, kind: str,
                      headers: dict[str, str] | None = None) -> None:
                with server.lock:
                    server.log.append({"kind": kind, "path": urlsplit(self.path).path,
                                       "status": status, "range": self.headers.get("Range"),
                                       "key": self.headers.get("x-api-key"),
                                       "auth": self.headers.get("Authorization")})
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def api(self, status: int, obj: Any, kind: str = "api") -> None:
                self.reply(status, json.dumps(obj).encode(), kind,
                           {"Content-Type": "application/json"})

            def do_GET(self) -> None:  # noqa: N802  (the http.server name)
                parts = urlsplit(self.path)
                kind = "file" if parts.path.startswith("/files/") else "api"
                with server.lock:
                    faults = server.faults
                    hang = kind == "api" and faults.hang_api > 0
                    faults.hang_api -= hang
                    if hang:
                        status = -1
                    elif faults.rate_limit:
                        faults.rate_limit -= 1
                        status = 429
                    elif faults.file_rate_limit and kind == "file":
                        faults.file_rate_limit -= 1
                        status = 429
                    elif faults.server_errors:
                        faults.server_errors -= 1
                        status = 503
                    else:
                        status = 0
                if status == -1:  # accepted, never answered (until the client gives up)
                    while not server.stopping.wait(0.05) and not self.gone():
                        pass
                    self.close_connection = True
                    return None
                if kind == "api" and server.faults.trickle_api > 0:
                    server.faults.trickle_api -= 1
                    return self.trickle(False)
                if kind == "file" and server.faults.trickle_files:
                    return self.trickle(server.faults.trickle_files == "headers")
                if status == 429:
                    return self.reply(429, b'{"message": "Too Many Requests"}', kind,
                                      {"Retry-After": server.faults.retry_after})
                if parts.path.startswith("/moved/"):  # a region redirect, as S3 answers
                    target = f"{server.faults.redirect_to}{self.path[len('/moved'):]}"
                    return self.reply(307, b"", "redirect", {"Location": target})
                if status:
                    return self.reply(status, b"Service Unavailable", kind)
                if kind == "file":
                    return self.file(parts.path[len("/files/"):], parse_qs(parts.query))
                self.route(parts.path)

            def route(self, path: str) -> None:
                segments = [s for s in path.split("/") if s]
                if segments[:2] != ["datasets", "v1"]:
                    return self.api(404, {"message": "Not Found"})
                rest = segments[2:]
                ids = sorted(server.releases)
                if rest == ["release"]:
                    return self.api(200, ids)
                if len(rest) >= 2 and rest[0] == "release":
                    release = ids[-1] if rest[1] == "latest" else rest[1]
                    if release not in server.releases:
                        return self.api(404, {"message": f"Release {rest[1]} not found"})
                    if len(rest) == 2:
                        extra = [server.faults.dataset] if server.faults.dataset else []
                        shown = release if server.faults.release_id is None \
                            else server.faults.release_id
                        return self.api(200, {"release_id": shown, "README": "terms",
                                              "datasets": [{"name": n, "description": n,
                                                            "README": ""}
                                                           for n in [*server.releases[release],
                                                                     *extra]]})
                    if len(rest) >= 4 and rest[2] == "dataset":
                        if not self.keyed():
                            return None
                        name = "/".join(rest[3:])
                        if name == server.faults.dataset:  # a hostile name: papers' files
                            name = "papers"
                        if name not in server.releases[release]:
                            return self.api(404, {"message": "Dataset not found"})
                        links = [server.link(p, k == 0) for k, p in
                                 enumerate(server.listing[(release, name)])]
                        return self.api(200, {"name": rest[3], "description": "",
                                              "README": "", "files": links})
                if len(rest) == 5 and rest[0] == "diffs" and rest[2] == "to":
                    if not self.keyed():
                        return None
                    start, end, name = rest[1], rest[3], rest[4]
                    end = ids[-1] if end == "latest" else end
                    if start not in ids or end not in ids or name not in DATASETS:
                        return self.api(404, {"message": "Not found"})
                    steps = ids[ids.index(start):ids.index(end) + 1]
                    diffs = [{"from_release": a, "to_release": b,
                              **{kind: [server.link(p, k == 0) for k, p in enumerate(paths)]
                                 for kind, paths in server.diff_files[(a, b, name)].items()}}
                             for a, b in zip(steps, steps[1:], strict=False)]
                    hostile = server.faults.step_release
                    if hostile is not None and len(diffs) > 1:  # a chain that still links up
                        diffs[0]["to_release"] = diffs[1]["from_release"] = hostile
                    return self.api(200, {"dataset": name, "start_release": start,
                                          "end_release": end, "diffs": diffs})
                return self.api(404, {"message": "Not Found"})

            def gone(self) -> bool:
                """The client closed the connection (what a hanging server waits for)."""
                import select

                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and not self.connection.recv(1, 0x2)  # MSG_PEEK

            def trickle(self, headers: bool) -> None:
                """A 200 of Content-Length 100,000 sent a byte every `trickle_every` seconds
                (its headers too: `headers`) until the client hangs up or the server stops."""
                with server.lock:
                    server.log.append({"kind": "trickle", "path": urlsplit(self.path).path,
                                       "status": 200, "range": self.headers.get("Range"),
                                       "key": self.headers.get("x-api-key"), "auth": None})
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                if not headers:
                    self.wfile.write(b"Content-Length: 100000\r\n\r\n")
                try:
                    for _ in range(100_000):
                        self.wfile.write(b"X" if headers else b" ")
                        self.wfile.flush()
                        if server.stopping.wait(server.faults.trickle_every):
                            break
                except OSError:  # the client hung up
                    pass
                self.close_connection = True

            def keyed(self) -> bool:
                key = self.headers.get("x-api-key")
                if server.faults.echo is not None:  # a careless server: the key echoed
                    self.reply(401, server.faults.echo(key or ""), "api",
                               {"Content-Type": "text/html"})
                    return False
                if key == KEY:
                    return True
                self.api(401 if not key else 403, {"message": "Forbidden"})
                return False

            def file(self, path: str, query: dict[str, list[str]]) -> None:
                token = (query.get("X-Amz-Signature") or [""])[0]
                with server.lock:
                    uses = server.tokens.get(token)
                    limit = server.faults.expire_after
                    if uses is not None and uses >= 0 and server.faults.expire_next:
                        server.faults.expire_next -= 1
                        server.tokens[token] = uses = -1
                    if uses is not None and uses >= 0:
                        server.tokens[token] = uses + 1
                        if limit and uses + 1 > limit:
                            server.tokens[token] = uses = -1
                if uses is None or uses < 0:
                    return self.reply(403, b"<Error><Code>AccessDenied</Code><Message>Request "
                                           b"has expired</Message></Error>", "file")
                body = server.files.get(path)
                if body is None and server.faults.file_name is not None:  # a hostile name
                    body = server.files.get(path.rsplit("/", 1)[0])
                    path = path.rsplit("/", 1)[0]
                if body is None:
                    return self.reply(404, b"NoSuchKey", "file")
                name = path.rsplit("/", 1)[-1]
                with server.lock:
                    corrupt = server.faults.corrupt.get(name, 0)
                    if corrupt:
                        server.faults.corrupt[name] = corrupt - 1
                    cut = server.faults.truncate.get(name, 0)
                    if cut:
                        server.faults.truncate[name] = cut - 1
                if corrupt:
                    middle = len(body) // 2
                    body = body[:middle] + bytes(64) + body[middle + 64:]
                start, status, headers = 0, 200, {}
                wanted = self.headers.get("Range")
                if wanted and wanted.startswith("bytes=") and wanted.endswith("-"):
                    start = int(wanted[len("bytes="):-1])
                    if start >= len(body):
                        return self.reply(416, b"", "file")
                    status = 206
                    headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
                payload = body[start:]
                with server.lock:
                    server.log.append({"kind": "file", "path": path, "status": status,
                                       "range": wanted, "key": self.headers.get("x-api-key"),
                                       "auth": self.headers.get("Authorization")})
                with server.lock:
                    extra = server.faults.overstate.get(name, 0)
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload) + extra))
                for header, value in headers.items():
                    self.send_header(header, value)
                self.end_headers()
                if cut:  # half the body, then the connection drops
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return None
                step = 4096
                for at in range(0, len(payload), step):
                    if server.faults.throttle:
                        time.sleep(server.faults.throttle)
                    self.wfile.write(payload[at:at + step])
                if extra:  # fewer bytes than announced: the connection ends there
                    self.wfile.flush()
                    self.close_connection = True
                return None

        return Handler
