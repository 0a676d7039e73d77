"""The Semantic Scholar Datasets API's client, shared by make download (download.py) and its
update by diffs (s2diffs.py): the HTTP calls and their bounded retries, the checks of every
value of an answer that becomes a path, one file fetched resumably and checked
(`check_shard`), and download.json, the record of a downloaded folder.

The protocol (docs/ingest.md restates it): `GET /datasets/v1/release/` lists the release ids
(dates), `GET /datasets/v1/release/{id}` (`latest` allowed) names a release's datasets,
`GET /datasets/v1/release/{id}/dataset/{name}` gives the presigned links of a dataset's files
(with the `x-api-key` header), `GET /datasets/v1/diffs/{start}/to/{end}/{name}` the update and
delete files of each release step between two releases. The base URL is S2_API_URL (default
https://api.semanticscholar.org), the key S2_API_KEY: sent as a header, never logged, never
written anywhere.

Every value of a server's answer that becomes a path (release ids, dataset names, file names
from links) is checked against its documented shape first (pipeline.layout: S2_RELEASE,
S2_DATASET, released_shard), so nothing is written or removed outside the raw folder.
Credentials in S2_API_URL (http://user:password@host) are sent as HTTP basic auth to the API
only and shown nowhere, like the key.

HTTP: every request goes through pipeline/core/http.py, the package's one client. An API call
is `bounded_request`: its retries (429, 5xx, no answer) each logged, all within `api_wait`
seconds by the wall clock, headers and body, whatever the server trickles; a redirect is not
followed (the key would go where it points); its answer read up to MAX_ANSWER bytes. A file
is one `opened` attempt at a time, from the bytes its partial file holds: redirects followed
(a presigned link carries no key), its pace bounded (`Stall`: headers within the connect and
read timeouts, then at least `stall_bytes` in every `stall_window` seconds); `Retries` decides
what comes next: resumed, the link asked for again, or one line. A stalled attempt that brought
fewer than `stall_bytes` is a try without progress, so a host trickling a byte a second is
given up on after `retries` tries (docs/ingest.md, "Bounded waits"). What no retry changes is
one line at once: a malformed reply, a redirect not followed (a loop, another scheme), and a
whole file that is no file of records (`check_shard`: none, or a line longer than any record
holds), so that a download is complete by its records, not its bytes.

Secrets: the key and the base URL's credentials (`Settings.secrets`) are hidden from every line
that shows a server's text (core/secrets.redacted: its errors and headers, in core/http.py;
here, the release ids and links of its answers), and a link whose path holds one is refused.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit

import orjson
from isal import igzip

from pipeline.core.atomic import disk_errors
from pipeline.core.checksums import remember
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.http import (
    RETRIED,
    STALL_BYTES,
    STALL_WINDOW,
    Bounds,
    NoAnswer,
    Stall,
    Stream,
    Words,
    basic_auth,
    bounded_request,
    connection_pool,
    opened,
    retry_note,
    said,
)
from pipeline.core.secrets import Secrets, header_secret, holds_secret, redacted
from pipeline.core.textfiles import LineTooLong, bounded_lines
from pipeline.ingest import shards
from pipeline.ingest.shards import READ_ERRORS, S2AG_DATASETS, shard_lines
from pipeline.layout import (
    DOWNLOAD_MANIFEST,
    DOWNLOAD_PARTIAL,
    MAX_SHARD_NAME,
    S2_DATASET,
    S2_RELEASE,
    released_shard,
)

log = logging.getLogger(__name__)

API_URL_ENV = "S2_API_URL"  # where the Datasets API is (the tests: a server on 127.0.0.1)
API_KEY_ENV = "S2_API_KEY"  # the key, as Semantic Scholar's own examples read it
DEFAULT_API = "https://api.semanticscholar.org"
API_PATH = "/datasets/v1"
KEY_HEADER = "x-api-key"
LATEST = "latest"
MANIFEST_VERSION = 1
CHUNK = 1 << 20  # bytes read from a file at a time (checking it)
EXPIRED_STATUS = (400, 401, 403)  # what a file host answers to an expired presigned link
MAX_PAUSE = 120.0  # seconds: the longest pause between tries (a Retry-After included)
MAX_ANSWER = 64 << 20  # bytes of an API answer read at most (a listing of links: some MB)
NOTICE = 30.0  # seconds after which an API call not yet answered is said, once
# A refusal's repair by status (any other: API_HINT)
KEY_HINT = (f"check the key in {API_KEY_ENV} (or ask for one at "
            "https://www.semanticscholar.org/product/api)")
API_HINTS = {401: KEY_HINT, 403: KEY_HINT,
             404: "check RELEASE (a date such as 2026-11-18, or latest) and DATASETS"}
API_HINT = f"check {API_URL_ENV}, or run again later"
MAX_FILE = 1 << 36  # bytes a file may have at most (64 GiB: S2's shards are a few GB)
BAD_DOWNLOADS = 3  # a file whose whole bytes fail verification this many times is an error


@dataclass(frozen=True)
class Settings:
    """How to reach the API and how hard to try: base URL and key (from the environment),
    files at once, retries without progress per file or API call, the first pause
    (doubling), timeouts, the longest an API call may take, its tries and pauses together,
    and a file's least pace (`stall_bytes` in every `stall_window` seconds).
    Credentials in the base URL are taken out of it (`auth`), so that the URL can be shown."""

    base_url: str
    key: str = field(repr=False)  # never shown, not even in a repr
    parallel: int = 4
    retries: int = 8
    backoff: float = 2.0
    connect_timeout: float = 30.0
    read_timeout: float = 120.0
    api_wait: float = 600.0
    stall_window: float = STALL_WINDOW  # a file's body: at least stall_bytes in each window
    stall_bytes: int = STALL_BYTES
    auth: str = field(default="", repr=False)  # user:password of the base URL, never shown

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.username is not None or parts.password is not None:
            object.__setattr__(self, "auth", f"{unquote(parts.username or '')}:"
                                             f"{unquote(parts.password or '')}")
            object.__setattr__(self, "base_url", public(self.base_url))

    @property
    def secrets(self) -> tuple[str, ...]:
        """What the API's requests carry that no line shows: the key, and the base URL's
        credentials (as given, the password alone, and as basic auth sends them)."""
        if not self.auth:
            return (self.key,)
        return (self.key, self.auth, self.auth.partition(":")[2],
                base64.b64encode(self.auth.encode()).decode())

    def bounds(self) -> Bounds:
        """An API call's retries, backoff (with jitter), timeouts and deadline, and a file's
        backoff: core/http.Bounds, checked sane there (the options refuse nonsense first)."""
        return Bounds(self.retries, self.backoff, MAX_PAUSE, self.connect_timeout,
                      self.read_timeout, self.api_wait, NOTICE, time.sleep, time.monotonic,
                      jitter=True)

    @classmethod
    def from_environment(cls, **options: Any) -> Settings:
        """The base URL (S2_API_URL) and the key (S2_API_KEY); a missing key is one line."""
        key = header_secret(API_KEY_ENV, os.environ.get(API_KEY_ENV))  # stripped, checked
        if not key:
            raise InputError(f"no Semantic Scholar API key: set {API_KEY_ENV} in the "
                             "environment (the Datasets API gives file links only with a key; "
                             "ask for one at https://www.semanticscholar.org/product/api)")
        base = os.environ.get(API_URL_ENV, "").strip() or DEFAULT_API
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"{API_URL_ENV}={public(base)!r}: give the Datasets API's base "
                             f"URL, such as {DEFAULT_API}")
        return cls(base_url=base.rstrip("/"), key=key, **options)


def public(url: str) -> str:
    """A link without its query (a presigned link's signature) and without credentials
    (user:password@): what a log, an error or download.json shows."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def _shown(value: object, secrets: Secrets = None) -> str:
    """A value from a server (or DATASETS), as an error line shows it: quoted, one line, cut
    short, the request's `secrets` hidden (core/secrets.redacted)."""
    text = redacted(repr(value), secrets)
    return text if len(text) <= 60 else f"{text[:57]}..."


def checked_release(value: object, what: str, secrets: Secrets = None) -> str:
    """A release id from the API's answer: a date (S2_RELEASE), else one line (the value
    redacted of `secrets`). A release id names folders (.diffs/<from>_<to>) and shards
    (update-<release>-<k>), so nothing else is taken."""
    if not isinstance(value, str) or not S2_RELEASE.fullmatch(value):
        raise InputError(f"{what}: the API's answer names release {_shown(value, secrets)}, not a "
                         "release date such as 2026-11-18; run again later (or report it to "
                         "Semantic Scholar)")
    return value


def checked_datasets(datasets: list[str]) -> list[str]:
    """The datasets asked for (DATASETS), each a dataset name (S2_DATASET: it names a folder
    of the raw folder), in the order given, once each; an empty list is refused (it is not
    'all of them': those are hundreds of GB)."""
    if not datasets:
        raise InputError("DATASETS: no dataset given; name them, separated by commas (such "
                         f"as {','.join(S2AG_DATASETS)})")
    bad = [d for d in datasets if not S2_DATASET.fullmatch(d)]
    if bad:
        raise InputError(f"DATASETS: {_shown(bad[0])} is not a dataset name (lowercase "
                         "letters, digits, '-' and '_', such as papers or paper-ids)")
    return list(dict.fromkeys(datasets))


def link_name(url: str) -> str:
    """The file's name in a link: the last part of its path."""
    return urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]


class Stopped(Exception):
    """Another file failed (or the user pressed Ctrl-C): this one stops, its bytes kept."""


class Client:
    """The Datasets API's JSON endpoints, and raw GETs of file links, over one pool."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.http = connection_pool(settings.parallel + 2)
        self.api_headers = {KEY_HEADER: settings.key}
        if settings.auth:
            self.api_headers |= basic_auth(settings.auth)
        self.secrets = settings.secrets  # what a server's text shown never holds
        self.bounds = settings.bounds()
        self.stall = Stall(settings.connect_timeout + settings.read_timeout,
                           settings.stall_window, settings.stall_bytes)

    def get_json(self, path: str, what: str) -> Any:
        """GET base + /datasets/v1 + path with the key; the parsed JSON or one clear line.
        429, 5xx and no answer are tried again (each retry logged) at most `retries` times,
        all within `api_wait` seconds (core/http.bounded_request)."""
        settings = self.settings
        where = f"the Semantic Scholar Datasets API at {settings.base_url} ({what})"
        words = Words("download", where, API_URL_ENV, "API call", f"its answer ({what})",
                      "run the download again (the files downloaded so far are kept)",
                      API_HINTS, API_HINT)
        data = bounded_request(self.http, "GET", f"{settings.base_url}{API_PATH}{path}", None,
                               self.api_headers, self.secrets, self.bounds, words, MAX_ANSWER)
        if data is None:
            raise InputError(f"{where}: its answer is larger than {MAX_ANSWER:,} bytes; check "
                             f"{API_URL_ENV}")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            raise InputError(f"{where}: its answer is not JSON (it says: "
                             f"{said(data, self.secrets)}); check {API_URL_ENV}") from None

    def releases(self) -> list[str]:
        """The release dates the API lists (what is not a date left out: a line shows them)."""
        listed = self.get_json("/release/", "list of releases")
        return sorted(r for r in listed if isinstance(r, str) and S2_RELEASE.fullmatch(r)) \
            if isinstance(listed, list) else []

    def release(self, release: str) -> dict[str, Any]:
        info = self.get_json(f"/release/{release}", f"release {release}")
        if not isinstance(info, dict):
            raise InputError(f"release {release}: the API's answer names no release date")
        checked_release(info.get("release_id"), f"release {release}", self.secrets)
        return info

    def file_links(self, release: str, dataset: str) -> list[str]:
        info = self.get_json(f"/release/{release}/dataset/{dataset}",
                             f"dataset {dataset} of release {release}")
        files = info.get("files") if isinstance(info, dict) else None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise InputError(f"dataset {dataset} of release {release}: the API's answer "
                             "lists no files")
        return files

    def diffs(self, start: str, end: str, dataset: str) -> list[dict[str, Any]]:
        info = self.get_json(f"/diffs/{start}/to/{end}/{dataset}",
                             f"diffs of {dataset} from {start} to {end}")
        steps = info.get("diffs") if isinstance(info, dict) else None
        if not isinstance(steps, list):
            raise InputError(f"diffs of {dataset} from {start} to {end}: the API's answer "
                             "lists no diffs")
        return steps

    def open(self, url: str, offset: int) -> contextlib.AbstractContextManager[Stream]:
        """A file link's bytes from `offset` on (a Range request), streamed, redirects followed
        (S3 answers 307 for another region), its pace bounded (`stall`), not retried
        (core/http.opened). Neither the key nor credentials are sent: a presigned link needs
        none, and the file host is not the API's."""
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        settings = self.settings
        return opened(self.http, url, headers, self.stall, settings.connect_timeout,
                      settings.read_timeout, self.secrets)


# ---- the links of a dataset's files, asked for again when they expire --------------------------
class Links:
    """The current presigned link of each file of one dataset: `url(name)`; `renew(name,
    seen)` asks the API again unless another thread already has since `seen` was handed out.
    A link's path names the file and is shown in lines, so one that holds any of `secrets`
    (the key, in any form a server writes it) is refused, and what a line shows of a link is
    redacted of them."""

    def __init__(self, fetch: Callable[[], list[str]], what: str, secrets: Secrets = None):
        self.fetch, self.what, self.secrets = fetch, what, secrets
        self.lock = threading.Lock()
        self.generation = 0
        self.by_name = self._read()

    def _read(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for url in self.fetch():
            if urlsplit(url).scheme not in ("http", "https"):
                raise InputError(f"{self.what}: the API's answer lists "
                                 f"{_shown(public(url), self.secrets)}, not an http(s) link; "
                                 "run again later")
            if holds_secret(public(url), self.secrets):
                raise InputError(f"{self.what}: the API's answer lists a link whose path holds "
                                 "the key (not shown); run again later (or report it to "
                                 "Semantic Scholar)")
            name = released_shard(link_name(url))
            if len(name) > MAX_SHARD_NAME:
                raise InputError(f"{self.what}: the API's answer lists a file named "
                                 f"{_shown(name, self.secrets)}, longer than {MAX_SHARD_NAME} "
                                 "characters; run again later (or report it to Semantic "
                                 "Scholar)")
            if name in found:
                raise InputError(f"{self.what}: two files named {name} (as "
                                 f"{redacted(public(url), self.secrets)}); the release cannot "
                                 "be downloaded into one folder")
            found[name] = url
        return found

    def names(self) -> list[str]:
        return list(self.by_name)  # the API's order: a trial subset takes the first ones

    def url(self, name: str) -> tuple[str, int]:
        with self.lock:
            if name not in self.by_name:
                raise InputError(f"{self.what}: the API no longer lists {name}; run again")
            return self.by_name[name], self.generation

    def renew(self, seen: int) -> None:
        with self.lock:
            if self.generation == seen:
                self.by_name = self._read()
                self.generation += 1
                log.info("%s: links asked for again (expired)", self.what)


# ---- one file: resumable, checked --------------------------------------------------------------
@dataclass
class Meter:
    """Bytes downloaded by every thread, for the progress lines."""

    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n


class _Hashing(io.RawIOBase):
    """A binary file read through, its sha256 kept (the gzip reader reads it to the end)."""

    def __init__(self, handle: IO[bytes]):
        super().__init__()
        self.handle, self.sha, self.size = handle, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.handle.read(len(buffer))
        buffer[: len(data)] = data
        self.sha.update(data)
        self.size += len(data)
        return len(data)


class NotRecords(ValueError):
    """A whole gzip stream that is no file of records: none at all, or a line longer than
    any record holds. No download of it changes that."""


def check_shard(path: Path, records: bool = True) -> dict[str, Any]:
    """The file's size, sha256 and line count, its gzip stream read to the end a line at a
    time, each held up to shards.MAX_RECORD bytes (a reader's bound). A file that is not a
    whole gzip stream raises ValueError naming why; one whose stream is whole but holds a
    longer line, or (`records`: a dataset's file, not a diff's, which may be empty) no record
    at all, NotRecords."""
    with path.open("rb") as raw:
        hashing = _Hashing(raw)
        lines, held = 0, False
        try:
            with igzip.IGzipFile(fileobj=hashing, mode="rb") as gz:  # type: ignore[arg-type]
                for lines, line in bounded_lines(gz, shards.MAX_RECORD):  # noqa: B007
                    held = held or bool(line.strip())
        except LineTooLong as exc:
            raise NotRecords(f"its gzip stream is whole, but its {exc}, more than any record "
                             "holds") from None
        except READ_ERRORS as exc:
            raise ValueError(f"not a whole gzip stream ({exc})") from None
        if records and not held and hashing.size:
            raise NotRecords(f"its gzip stream is whole, but holds no record ({lines:,} "
                             f"lines, none of them a record)")
        while hashing.read(CHUNK):  # bytes after the stream (none in a good file)
            pass
        hashing.close()
    if hashing.size == 0:
        raise ValueError("an empty file")
    return {"bytes": hashing.size, "sha256": hashing.sha.hexdigest(), "lines": lines}


def _content_range(value: str | None) -> tuple[int, int | None] | None:
    """(first byte, total or None) of a Content-Range header `bytes a-b/total`."""
    match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", value or "")
    if not match:
        return None
    return int(match[1]), (None if match[2] == "*" else int(match[2]))


def _size(path: Path) -> int:
    """Bytes of `path`; 0 when there is no such file (no partial yet)."""
    return path.stat().st_size if path.exists() else 0


@dataclass
class Attempt:
    """What one request for a file's bytes came to: the answer's status (None: no answer, or
    not the range asked for), the whole file's bytes when the answer says, what went wrong
    in words for the log ('': nothing), the seconds the host asked to wait (Retry-After),
    whether it ended below the least pace (`stalled`: core/http.Stall) and whether no retry
    changes it (`final`: a malformed reply, a redirect not followed)."""

    status: int | None = None
    total: int | None = None
    note: str = ""
    asked: float | None = None
    stalled: bool = False
    final: bool = False

    @property
    def body(self) -> bool:
        """Bytes of the file came (all or part of them)."""
        return self.status in (200, 206)

    def whole(self, size: int) -> bool:
        """The body came without a fault and the partial now holds `size`, all the bytes
        the host announced (or it announced none)."""
        return self.body and not self.note and (self.total is None or size == self.total)

    def shown(self) -> str:
        """The attempt's fault as a log line says it."""
        return self.note or f"HTTP {self.status}"


def _answer_range(resp: Stream, offset: int) -> tuple[int | None, int | None]:
    """(status, the file's whole size or None) of an answer to a request from byte `offset`:
    a 206 for another range than the one asked for counts as no answer (status None), so the
    partial is read again from 0; a 200 is the whole file (the host ignored the range)."""
    if resp.status == 206:
        span = _content_range(resp.headers.get("Content-Range"))
        return (None, None) if span is None or span[0] != offset else (206, span[1])
    if resp.status != 200:
        return resp.status, None
    length = resp.headers.get("Content-Length")
    # ASCII digits: a server's '²' passes str.isdigit(), then fails int()
    return 200, int(length) if length and length.isascii() and length.isdigit() else None


def _save_body(answer: Stream, part: Path, append: bool, meter: Meter,
               stop: threading.Event | None) -> None:
    """Write the answer's body to the partial file as it comes, after its bytes (`append`)
    or in their place; `stop` set: Stopped, the bytes written so far kept. A file that grows
    past MAX_FILE bytes (a host sending without end) is one line, its partial removed."""
    with disk_errors(part.parent), part.open("ab" if append else "wb") as out:
        for block in answer.chunks():
            out.write(block)
            meter.add(len(block))
            if out.tell() > MAX_FILE:
                out.close()
                part.unlink(missing_ok=True)
                before, _, after = DOWNLOAD_PARTIAL.partition("{}")
                name = part.name.removeprefix(before).removesuffix(after)
                raise InputError(f"{part.parent.name} file {name}: its host sent more than "
                                 f"{MAX_FILE:,} bytes, more than any S2 file holds (its partial "
                                 "file removed); run again later (or report it to Semantic "
                                 "Scholar)")
            if stop is not None and stop.is_set():
                raise Stopped(part.name)


def attempt(client: Client, url: str, part: Path, meter: Meter,
            stop: threading.Event | None = None) -> Attempt:
    """One request for the bytes of a file after those its partial file `part` holds (a
    Range request), written there: appended, or from byte 0 when the host sends the whole
    file. A range the host cannot give (416 past a partial that holds more than the file,
    another range than asked for) removes the partial, so that the next try starts from
    byte 0. Faults are the attempt's note (an attempt below the least pace: `stalled`), never
    raised; `stop` set raises Stopped."""
    offset = _size(part)
    got = Attempt()
    try:
        with client.open(url, offset) as answer:
            got.status, got.total = _answer_range(answer, offset)
            if got.body:
                _save_body(answer, part, got.status == 206, meter, stop)
            elif got.status is None or (got.status == 416 and offset):
                answer.discard()
                part.unlink(missing_ok=True)
                got.note = (f"HTTP {answer.status} to the range from byte {offset}; from byte 0 "
                            "again")
            else:
                got.asked, said = retry_note(answer.headers, client.secrets,
                                             client.bounds.max_wait)
                got.note = f"HTTP {got.status}{said}" if said else ""
                answer.discard()
    except NoAnswer as exc:
        got.note, got.stalled, got.final = exc.note, exc.stalled, exc.final
    except OSError as exc:
        got.note = type(exc).__name__
    return got


def verified(part: Path, final: Path, records: bool = True) -> dict[str, Any]:
    """A whole download checked (check_shard; `records`: it holds at least one) and renamed
    to `final`: its record (name, bytes, sha256, lines). Bytes that fail the check are
    removed (the next download starts from byte 0) and raise ValueError naming why
    (NotRecords: no download changes it)."""
    try:
        record = check_shard(part, records)
    except ValueError:
        part.unlink()
        raise
    os.replace(part, final)
    remember(final, record["sha256"])  # a later run checks it without reading it
    return {"name": final.name, **record}


class Retries:
    """The bounded retry policy of one file's download: `settings.retries` tries without
    progress (bytes on disk beyond the most the file ever had: a restart from byte 0 is
    none), then one line; BAD_DOWNLOADS whole downloads that fail verification, then one
    line; a link the host refuses as expired (EXPIRED_STATUS) asked for again; a 404, and an
    attempt no retry changes (`Attempt.final`), one line at once; between tries the backoff
    of the client's `bounds` (core/http.Bounds.wait), cut short by `stop` (then Stopped)."""

    def __init__(self, settings: Settings, name: str, what: str, most: int = 0,
                 stop: threading.Event | None = None):
        self.settings, self.name, self.what, self.stop = settings, name, what, stop
        self.bounds = settings.bounds()
        self.secrets = settings.secrets
        self.tries = 0  # tries without progress
        self.bad = 0  # whole downloads that failed verification
        self.most = most  # the furthest the bytes have come

    def progressed(self, size: int, least: int = 1) -> bool:
        """True, the tries counted again from 0, when `size` bytes are at least `least` more
        than ever (a stalled attempt: a window's bytes, core/http.Stall)."""
        if size - self.most < max(1, least):
            return False
        self.tries, self.most = 0, size
        return True

    def damaged(self, problem: ValueError, url: str) -> None:
        """Count a whole download that failed verification; the last allowed is one line."""
        self.bad += 1
        if self.bad >= BAD_DOWNLOADS:
            raise InputError(f"{self.what} file {self.name} ({self._link(url)}): downloaded whole "
                             f"{self.bad} times, {problem} each time; run again later or "
                             "report it to Semantic Scholar") from None
        log.warning("%s %s: %s; downloading it again", self.what, self.name, problem)

    def failed(self, got: Attempt, url: str, renew: Callable[[], None]) -> None:
        """Count a try without progress (`renew` the link first when the host refused it as
        expired), refuse a file gone, out of tries or whose attempt no retry changes, else wait
        before the next."""
        if got.final:
            self.refuse(f"its host answered {got.note}", url)
        if got.status in EXPIRED_STATUS:
            log.info("%s %s: link refused (HTTP %s, expired); asking for it again", self.what,
                     self.name, got.status)
            renew()
        elif got.status == 404:
            raise InputError(f"{self.what} file {self.name} is gone from the file host (HTTP "
                             f"404, {self._link(url)}): the release may be withdrawn; run "
                             "again")
        self.tries += 1
        if self.tries > self.settings.retries:
            raise InputError(f"{self.what} file {self.name}: no progress after {self.tries} "
                             f"tries (last: {got.shown()}); run again later (the bytes "
                             "downloaded so far are kept)")
        wait = self.bounds.wait(self.tries - 1, got.asked if got.status in RETRIED else None)
        log.warning("%s %s: %s; trying again in %.1f s", self.what, self.name, got.shown(),
                    wait)
        self._wait(wait)

    def refuse(self, problem: str, url: str) -> None:
        """One line at once for what no retry changes (`problem`, in words)."""
        raise InputError(f"{self.what} file {self.name} ({self._link(url)}): {problem}, which "
                         "no retry changes; run again later (or report it to Semantic "
                         "Scholar)")

    def _link(self, url: str) -> str:
        """A file's link as a line shows it: public, redacted of the API's secrets."""
        return redacted(public(url), self.secrets)

    def _wait(self, seconds: float) -> None:
        """Pause before the next try; Stopped as soon as `stop` is set."""
        if self.stop is None:
            time.sleep(seconds)
        elif self.stop.wait(seconds):
            raise Stopped(self.name)


def fetch_file(client: Client, links: Links, name: str, folder: Path, meter: Meter,
               what: str, stop: threading.Event | None = None,
               records: bool = True) -> dict[str, Any]:
    """Download one file into `folder/name`, resuming its partial file; its record (name,
    bytes, sha256, lines) once whole and verified (`records`: a file of records, which holds
    one at least: a dataset's, not a diff's). `stop` set: Stopped, the partial kept.
    Each attempt (`attempt`) either ends whole (then `verified`), or made progress, or is
    counted by the bounded policy (`Retries`), so a file that never gets whole is one line
    after `retries` tries, whatever goes wrong; a whole one that is no file of records
    (NotRecords) is one line at once, nothing of it kept."""
    final, part = folder / name, folder / DOWNLOAD_PARTIAL.format(name)
    retries = Retries(client.settings, name, what, most=_size(part), stop=stop)
    while True:
        url, generation = links.url(name)
        got = attempt(client, url, part, meter, stop)
        size = _size(part)
        if got.whole(size):
            try:
                return verified(part, final, records)
            except NotRecords as exc:
                retries.refuse(str(exc), url)
            except ValueError as exc:
                retries.damaged(exc, url)
        elif got.body and retries.progressed(
                size, client.settings.stall_bytes if got.stalled else 1):
            # a break in a long file is not its failure
            log.warning("%s %s: broken off at byte %d%s (%s); resuming", what, name, size,
                        f" of {got.total}" if got.total else "", got.note or "short body")
        else:
            retries.failed(got, url, functools.partial(links.renew, generation))


# ---- the manifest beside the files ---------------------------------------------------------------
class Manifest:
    """download.json: the release, the datasets, each file's name, bytes, sha256 and lines
    (never the key, never a link). Saved after every file, so a kill loses none."""

    def __init__(self, raw_dir: Path):
        self.path = raw_dir / DOWNLOAD_MANIFEST
        self.lock = threading.Lock()
        self.damaged = False  # then `data` is empty: the shards are verified again
        try:
            self.data: dict[str, Any] = read_json(self.path) if self.path.is_file() else {}
        except InputError:
            self.data, self.damaged = {}, True
        self.data.pop("self_sha256", None)

    @property
    def datasets(self) -> dict[str, dict[str, Any]]:
        return self.data.setdefault("datasets", {})

    def files(self, dataset: str) -> dict[str, dict[str, Any]]:
        return {f["name"]: f for f in self.datasets.get(dataset, {}).get("files", [])}

    def save(self) -> None:
        with self.lock:
            write_json({**self.data, "manifest_version": MANIFEST_VERSION, "stage": "download",
                        "source": "s2ag"}, self.path)

    def add_file(self, dataset: str, record: dict[str, Any], order: list[str]) -> None:
        """Record one whole file; the list kept in the API's order."""
        with self.lock:
            entry = self.datasets[dataset]
            files = {f["name"]: f for f in entry["files"]}
            files[record["name"]] = record
            entry["files"] = [files[n] for n in order if n in files]
        self.save()


def iter_records(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line, line without its line end) of a gzipped JSONL file, each at most
    MAX_RECORD bytes (shards.shard_lines); a damaged file raises InputError."""
    try:
        with igzip.open(path, "rb") as handle:
            yield from shard_lines(handle, path)
    except READ_ERRORS as exc:
        raise InputError(f"{path}: not a whole gzip stream ({exc}); run make download "
                         "again") from None
