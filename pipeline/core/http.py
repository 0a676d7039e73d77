"""Every HTTP request of the package: the Semantic Scholar Datasets API's JSON answers and its
files (ingest/s2client.py, for make download and its diffs), the served embeddings
(encoding/served.py) and rerankings (encoding/served_rerank.py) and the judge's chat
completions (judging/chat.py). No other module imports an HTTP library (tests/core/test_http.py
looks).

Connections: `connection_pool`, urllib3's pool with no retry of its own, each connection
watched by its attempt's `Watch`. A served model's endpoint (embeddings, reranker, judge) is an
`Endpoint`: its URL, its pool, and its JSON headers, the key only in the Authorization one.

A request for an answer (`bounded_request`: a JSON POST, an API's GET): a request answered 429
or 5xx (RETRIED), or whose connection failed, is sent again up to `retries` times, after the
reply's Retry-After or an exponential backoff, capped at `max_wait` (`Bounds`, checked sane
when made; a longer Retry-After is said as such); a request not answered after `notice` seconds
is said at once, in one line. A malformed reply (no HTTP status line, more than 100 headers, a
line over 64 KiB: `malformed`) is not sent again, since the server answers the same: one line
says what was wrong with it. The deadline: a request takes at most `deadline` seconds by the
wall clock, its attempts and the waits between them, whatever the server does. Each attempt's
timeouts are cut to what is left; a reply is read as it arrives, the clock checked between
reads; and a watchdog (`Watch`) shuts the attempt's socket at the deadline, so that a server
that trickles its headers or its body (each byte restarts a socket's timeout) is given up on
then too, in one line. A reply is read up to a size (`most`): a larger one is not read further.

A file (`opened`: one attempt at a file's bytes, from an offset; the caller retries and resumes
it, ingest/s2client.Retries): a file is large and may legitimately take hours, so its bound is a
pace, not a deadline (`Stall`): its headers must arrive within `first` seconds, then at least
`least` bytes of its body in every `window` seconds (STALL_BYTES in STALL_WINDOW: 64 KiB a
minute); the watchdog shuts an attempt that falls below it, and the attempt ends `Stalled`. A 1
byte/s trickle thus ends each attempt after one window, and an attempt that stalled before
bringing a window's bytes counts as a try without progress.

Redirects: a request that carries a secret (a key, credentials) never follows one: the secret
would go where it points; the redirect is one line naming where it points (its URL shown
without credentials, query or fragment, a relative one resolved first). A file link carries
none (a presigned link signs itself), and follows up to MAX_REDIRECTS (S3 answers 307 for
another region's host), to http(s) links only and never back to one it came from: a loop, a
link of another scheme (file:, a unix socket's) or one redirect too many ends the attempt as
`final`, naming which, for the caller to say at once (no retry changes it).

Secrets: whatever a server sends that a line or log line shows passes core/secrets.redacted
(every escape layer a server can wrap a key in undone first), the request's secrets hidden:
its body (`said`: an error's message, the start of a reply that is not what was asked, decoded
whole, UTF-16 and UTF-32 too, shown as an excerpt of SAID characters at most), each header the
client shows (Retry-After, Location), and urllib3's own log lines (a redirect's path, a header
it could not parse: `_Internals`, by the secrets of the thread's attempt, `Watch.secrets`).
The headers it only reads as numbers (Content-Length, Content-Range) are never shown; words
for what went wrong are the client's own, never an exception's text (`failure`, `malformed`).

Ctrl-C: requests run on daemon threads (`each_at_once`; bounded_request called from the main
thread sends its request from one too), which a KeyboardInterrupt leaves behind, and the main
thread waits for them looking at a Ctrl-C every POLL seconds: the stage ends within a second.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import logging
import math
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from pipeline.core.errors import InputError
from pipeline.core.logs import counted
from pipeline.core.secrets import Secrets, decoded, one_line, redacted, shown_url

log = logging.getLogger(__name__)

RETRIED = (429, 500, 502, 503, 504)  # the statuses a request is sent again after
ERROR_BYTES = 1 << 16  # what an error reply's message is read from
SAID = 200  # characters of a server's message shown
MIN_LEFT = 0.001  # seconds an attempt's timeouts get at least (urllib3 refuses 0 and less)
CHUNK = 1 << 20  # bytes of a reply read at most at a time (what has arrived, up to this)
MAX_REDIRECTS = 5  # redirects a file link follows (it carries no secret)
STALL_WINDOW = 60.0  # seconds: a file's body brings at least STALL_BYTES in each ...
STALL_BYTES = 1 << 16  # ... or its attempt ends (about 1 KiB/s)
MAX_RETRIES = 1000  # what a Bounds may hold at most (the options' maximums are lower)
# seconds between a waiting thread's looks at a Ctrl-C: a signal that the system gives another
# thread (one blocked in a read) does not wake a wait without a timeout
POLL = 0.2
T = TypeVar("T")
R = TypeVar("R")


class Refusal(InputError):
    """A reply that no retry changes (a status neither 2xx, 3xx nor RETRIED), in one line;
    `status` lets a caller tell a refusal of one request's content (400, 413, 422: a text
    longer than the model's context) from one of every request (401, 404)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self):
        return type(self), (self.message, self.status)


def _sane(name: str, value: float, least: float = 0.0) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < least:
        raise ValueError(f"{name}={value!r}: a finite number of at least {least:g} "
                         "(the options' checks give one)")


@dataclass(frozen=True)
class Bounds:
    """How often and how long one request is tried: `retries` after the first attempt, the
    first wait without Retry-After `backoff` seconds (doubled at each retry; with `jitter`
    between half and all of it), no wait longer than `max_wait`, the timeouts `connect` and
    `read`, `deadline` seconds in all, the waiting line after `notice`; `pause` waits and
    `clock` keeps the deadline (the tests count the waits and move the clock with them).
    Nonsense (a negative or NaN backoff, a count out of range) is a ValueError: the options
    refuse it first, in one line."""

    retries: int
    backoff: float
    max_wait: float
    connect: float
    read: float
    deadline: float
    notice: float
    pause: Callable[[float], None]
    clock: Callable[[], float]
    jitter: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or \
                not 0 <= self.retries <= MAX_RETRIES:
            raise ValueError(f"retries={self.retries!r}: a whole number from 0 to {MAX_RETRIES}")
        for name in ("backoff", "max_wait", "notice"):
            _sane(name, getattr(self, name))
        for name in ("connect", "read", "deadline"):
            _sane(name, getattr(self, name), MIN_LEFT)

    def wait(self, attempt: int, asked: float | None = None) -> float:
        """Seconds before retry number `attempt` + 1 (0-based `attempt`): what the server
        asked for (Retry-After), else the backoff doubled `attempt` times; at most max_wait."""
        if asked is None:
            asked = self.backoff * 2.0 ** min(attempt, 64)
            if self.jitter:
                asked *= 0.5 + random.random() / 2
        return min(self.max_wait, asked)


@dataclass(frozen=True)
class Words:
    """What the lines say, in the stage's words: `stage` tags the log lines ("embed"),
    `where` names the model and endpoint, `variable` the URL's variable (EMBEDDINGS_URL),
    `span` what the deadline bounds ("batch"), `waiting` what the waiting line waits for
    ("the reply to a request of 8 inputs"), `again` the repair once tries run out ("embed
    again (...)"), `hints` a refusal's repair by status and `hint` any other status's."""

    stage: str
    where: str
    variable: str
    span: str
    waiting: str
    again: str
    hints: Mapping[int, str]
    hint: str


# ---- the watchdog: the socket of an attempt shut when its time is up, or its pace too slow
class Watch:
    """One attempt while its connection is used: `left` seconds from now its socket is shut,
    so that a connect, send or read blocked on it returns at once (a server trickling its
    reply restarts every socket timeout), and `expired` says so. `pace(window, least)` then
    replaces the deadline by a pace: at the end of each `window` seconds the socket is shut
    unless `least` bytes were `counted` in it (`stalled` says so). The connections of
    `connection_pool` tell the attempt of their thread (`current`) as they connect and send;
    leaving the `with` block ends the watch. `secrets`: what the attempt's request carries,
    which the client's internal log lines are redacted of (`_Internals`)."""

    current = threading.local()  # .watch: the attempt under way in a thread

    def __init__(self, left: float, secrets: Secrets = None) -> None:
        self.secrets = secrets
        self.lock = threading.Lock()
        self.connection: HTTPConnection | None = None
        self.expired = self.over = self.stalled = False
        self.count = self.mark = 0  # bytes counted; at the start of the window
        self.least = 0
        self.timer = self._timer(left, self._expire)

    @staticmethod
    def _timer(seconds: float, then: Callable[[], None]) -> threading.Timer:
        timer = threading.Timer(seconds, then)
        timer.daemon = True
        return timer

    def __enter__(self) -> Watch:
        Watch.current.watch = self
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        Watch.current.watch = None
        with self.lock:
            self.over = True
            self.timer.cancel()

    def using(self, connection: HTTPConnection) -> None:
        """The attempt's connection is `connection` (shut at once if the time is up)."""
        with self.lock:
            self.connection = connection
            if self.expired:
                _shut(connection)

    def counted(self, n: int) -> None:
        """`n` more bytes of the body arrived."""
        self.count += n

    def pace(self, window: float, least: int) -> None:
        """From now on, `least` bytes in every `window` seconds, else the socket is shut."""
        with self.lock:
            if self.over or self.expired:
                return
            self.timer.cancel()
            self.least, self.mark = least, self.count
            self.timer = self._timer(window, functools.partial(self._window, window))
            self.timer.start()

    def _window(self, window: float) -> None:
        with self.lock:
            if self.over or self.expired:
                return
            if self.count - self.mark < self.least:
                self.stalled = True
                self._shut_now()
                return
            self.mark = self.count
            self.timer = self._timer(window, functools.partial(self._window, window))
            self.timer.start()

    def _expire(self) -> None:
        with self.lock:
            if not self.over:
                self._shut_now()

    def _shut_now(self) -> None:
        self.expired = True
        if self.connection is not None:
            _shut(self.connection)


def _shut(connection: HTTPConnection) -> None:
    """`connection`'s socket shut both ways (the base socket's shutdown, never TLS's, which
    would talk to the server), where it has one."""
    sock = getattr(connection, "sock", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _tell(connection: HTTPConnection) -> None:
    watch = getattr(Watch.current, "watch", None)
    if watch is not None:
        watch.using(connection)


class _WatchedHTTP(HTTPConnection):
    """A connection that tells its thread's Watch when it connects and sends a request."""

    def connect(self) -> None:
        _tell(self)
        super().connect()
        _tell(self)  # its socket made now: shut if the time ran out while connecting

    def request(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _tell(self)
        super().request(*args, **kwargs)


class _WatchedHTTPS(_WatchedHTTP, HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTP


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPS


class _Internals(logging.Filter):
    """urllib3's own log lines are the client's internals: each request's URL at DEBUG (a
    presigned link's query, its signature, is cut before any handler sees it), and its
    warnings about a reply it could not read (a header cut by the watchdog, or one that is
    not a header: "Failed to parse headers", with the text it could not parse and a
    traceback) demoted to DEBUG without the traceback, since the client says what became of
    the request in its own one line. Each line quotes what a server sent (a redirect's path, a
    header), so it passes core/secrets.redacted with the secrets of the thread's attempt."""

    def filter(self, record: logging.LogRecord) -> bool:
        watch = getattr(Watch.current, "watch", None)
        message = redacted(record.getMessage(), watch.secrets if watch is not None else None)
        record.msg, record.args = re.sub(r"\?[^\s\"')]*", "?<query>", message), ()
        if record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
            record.exc_info = record.exc_text = None
        return True


for _name in ("urllib3", "urllib3.connection", "urllib3.connectionpool", "urllib3.poolmanager",
              "urllib3.response", "urllib3.util.retry"):
    logging.getLogger(_name).addFilter(_Internals())


Pool = urllib3.PoolManager  # what connection_pool makes, for the callers' annotations


def connection_pool(maxsize: int) -> Pool:
    """The clients' connections: `maxsize` kept per host, no retry or redirect of urllib3's
    own (the loops here decide), each watched by its attempt's Watch."""
    pool = urllib3.PoolManager(num_pools=8, maxsize=maxsize, retries=False)
    pool.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
    return pool


def basic_auth(credentials: str) -> dict[str, str]:
    """The Authorization header of HTTP basic auth for `credentials` (user:password)."""
    return urllib3.make_headers(basic_auth=credentials)


class _Late(Exception):
    """The deadline passed while a reply was read."""


# ---- a request for an answer, retried within bounds -------------------------------------------
def bounded_request(pool: Pool, method: str, url: str, body: bytes | None,
                    headers: Mapping[str, str], key: Secrets, bounds: Bounds, words: Words,
                    most: int) -> bytes | None:
    """The body of the 200 reply to `method` `url` (with `body`), None when it is larger than
    `most` bytes (read no further), after at most `bounds.retries` retries, all within
    `bounds.deadline` seconds; anything else is one line (InputError, Refusal) in `words`, a
    server's text redacted of `key` (one secret or several). Called from the main thread, the
    request goes from a thread of its own (each_at_once), so that a Ctrl-C is seen at once."""
    send = functools.partial(_request, pool, method, url, body, headers, key, bounds, words,
                             most)
    if threading.current_thread() is not threading.main_thread():
        return send()
    (data,) = each_at_once(lambda _: send(), [None], 1)
    return data


def _request(pool: Pool, method: str, url: str, body: bytes | None,
             headers: Mapping[str, str], key: Secrets, bounds: Bounds, words: Words,
             most: int) -> bytes | None:
    """bounded_request's request, in the thread it is called from."""
    clock = bounds.clock
    deadline = clock() + bounds.deadline
    why, made = "no attempt", 0
    for attempt in range(bounds.retries + 1):
        if attempt and clock() >= deadline:  # a wait's pause overshot it: no attempt left
            break
        made, left = attempt + 1, max(deadline - clock(), MIN_LEFT)
        connect, read = min(bounds.connect, left), min(bounds.read, left)
        notice = threading.Timer(bounds.notice, _waiting, (bounds, words, deadline))
        notice.daemon = True
        if bounds.notice < left:  # else the deadline's line comes first
            notice.start()
        late, asked, note = "no reply yet", None, ""  # late: the deadline's line, if now
        try:
            with Watch(left, key) as watch:
                response = pool.request(
                    method, url, body=body, headers=dict(headers), preload_content=False,
                    redirect=False, retries=False,
                    timeout=urllib3.Timeout(connect=connect, read=read))
                try:  # a connection goes back to the pool only with its reply read whole
                    if watch.expired:  # its headers cut short by the watchdog
                        raise _Late
                    status, why = response.status, f"it answered {response.status}"
                    late = "its reply still arriving"
                    if status == 200:
                        data = _read(response, most, deadline, clock)
                        if watch.expired:  # a reply cut by the watchdog
                            raise _Late
                        response.release_conn()
                        return data
                    _refuse(response, url, key, words)
                    asked, note = retry_note(response.headers, key, bounds.max_wait)
                finally:
                    response.close()
        except urllib3.exceptions.HTTPError as exc:  # refused, dropped, timed out, shut
            if watch.expired:
                raise InputError(_gave_up(bounds, words, late, made)) from None
            wrong = malformed(exc)
            if wrong is not None:  # the server's doing: the next attempt's reply is the same
                raise InputError(f"{words.where}: its reply is malformed ({wrong}), which no "
                                 f"retry changes: check that {words.variable} is the address "
                                 f"of the server, then {words.again}") from None
            why = f"the connection failed ({failure(exc, connect, read)})"
        except _Late:
            raise InputError(_gave_up(bounds, words, late, made)) from None
        finally:
            notice.cancel()
        if attempt == bounds.retries:
            raise InputError(f"{words.where}: {why}{note} after {bounds.retries} retries "
                             f"({counted(made, 'attempt')}): check the server, then {words.again}")
        wait = bounds.wait(attempt, asked)
        if clock() + wait >= deadline:
            break
        log.warning(f"[{words.stage}] {words.where}: {why}{note}; trying again in {wait:.3g} s "
                    f"({attempt + 1} of {bounds.retries} retries)")
        bounds.pause(wait)
    raise InputError(f"{words.where}: {why}, and no reply within the {bounds.deadline:g} s "
                     f"{_a(words.span)} may take ({counted(made, 'attempt')}): check the "
                     f"server, then {words.again}")


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def _read(response: urllib3.BaseHTTPResponse, most: int, deadline: float,
          clock: Callable[[], float]) -> bytes | None:
    """A 200 reply's body, read as it arrives (CHUNK bytes at most at a time), the clock
    checked after each read (_Late once `deadline` has passed): None once it is larger than
    `most` bytes, by its Content-Length (unread) or as read."""
    length = response.headers.get("Content-Length", "")
    if length.isascii() and length.isdigit() and int(length) > most:
        return None
    data = bytearray()
    while chunk := response.read1(CHUNK):
        data += chunk
        if len(data) > most:
            return None
        if clock() > deadline:
            raise _Late
    return bytes(data)


def shown_location(location: str, url: str) -> str:
    """Where a redirect from `url` points, as a line shows it: resolved against `url` when
    relative, then without credentials, query or fragment (core/secrets.shown_url)."""
    try:
        target = urljoin(url, location.strip())
    except ValueError:
        target = location
    return shown_url(target)


def _refuse(response: urllib3.BaseHTTPResponse, url: str, key: Secrets, words: Words) -> None:
    """One line for a redirect (not followed) or a status no retry changes (a Refusal)."""
    status = response.status
    if 300 <= status < 400:
        location = response.headers.get("Location", "")
        target = one_line(shown_location(redacted(location, key), url), SAID) \
            if location.strip() else "nowhere said"
        raise InputError(f"{words.where}: it answered {status}, a redirect to {target} (not "
                         f"followed): give {words.variable} the URL it redirects to, if it is "
                         "the endpoint")
    if status not in RETRIED:
        raise Refusal(refusal(status, response.read(ERROR_BYTES), key, words), status)


def _gave_up(bounds: Bounds, words: Words, late: str, made: int) -> str:
    """The line of a request whose deadline passed during its attempt number `made` (`late`:
    what it waited for)."""
    return (f"{words.where}: gave up after the {bounds.deadline:g} s {_a(words.span)} may "
            f"take, {late} ({counted(made, 'attempt')}): check the server, then {words.again}")


def _waiting(bounds: Bounds, words: Words, deadline: float) -> None:
    """The one line said when a request is not answered after `bounds.notice` seconds."""
    log.warning(f"[{words.stage}] {words.where}: waiting for {words.waiting} "
                f"({bounds.notice:g} s so far; the {words.span} gives up in "
                f"{max(0.0, deadline - bounds.clock()):.0f} s)")


def malformed(exc: Exception) -> str | None:
    """What is wrong with a reply that http.client could not read as HTTP/1.x, in words (never
    its text, a server's); None when the request failed otherwise (refused, dropped, timed
    out: a connection failure, which a retry may change)."""
    reason = getattr(exc, "reason", None) or exc  # MaxRetryError wraps it
    cause = reason.args[-1] if isinstance(reason, urllib3.exceptions.ProtocolError) and \
        reason.args else None
    if isinstance(cause, http.client.RemoteDisconnected):  # closed before a reply
        return None
    if isinstance(cause, http.client.LineTooLong):
        line = "status line" if "status" in str(cause) else "header line"
        return f"a {line} longer than {http.client._MAXLINE:,} bytes"
    if isinstance(cause, http.client.UnknownProtocol):
        return "an HTTP version other than 1.0 and 1.1"
    if isinstance(cause, http.client.BadStatusLine):
        return "no HTTP status line: an HTTP/0.9 reply, or no HTTP at all"
    if type(cause) is http.client.HTTPException and "headers" in str(cause):
        return f"more than {http.client._MAXHEADERS} headers"
    return None


def failure(exc: Exception, connect: float, read: float) -> str:
    """Why a request got no answer, in words (never the URL)."""
    errors = urllib3.exceptions
    reason = getattr(exc, "reason", None) or exc  # MaxRetryError wraps it
    if isinstance(reason, errors.NameResolutionError):
        return "its host name does not resolve"
    if isinstance(reason, errors.NewConnectionError):
        return "connection refused" if "refused" in str(reason).lower() else "no connection"
    if isinstance(reason, errors.ConnectTimeoutError):
        return f"no connection within {connect:g} s"
    if isinstance(reason, errors.ReadTimeoutError):
        return f"no answer within {read:g} s"
    return type(reason).__name__


# ---- what a server says, as a line shows it ---------------------------------------------------
def said(data: bytes, key: Secrets) -> str:
    """What a server's reply says, as a line shows it (SAID characters at most): its JSON
    error's message (error.message, error, message or detail), else its text, decoded whole
    (UTF-8, or UTF-16/32 by its byte-order mark or its NULs), the key and URL secrets replaced
    before it is cut (core/secrets.redacted)."""
    text = decoded(data)
    try:
        reply = json.loads(text)
    except ValueError:
        reply = None
    message = _message(reply) if isinstance(reply, dict) else None
    return redacted(message or text, key, SAID) or "nothing said"


def json_reply(data: bytes, key: Secrets, fits: Callable[[Any], bool], wrong: str,
               repair: str) -> Any:
    """The reply's JSON value when `fits(value)`; else one line: `wrong` (what the reply is
    not), what it begins with (`said`: the key hidden) and the `repair`. The one reading of
    an API's JSON answer (served embeddings and rerankings, the judge's chat)."""
    try:
        reply = json.loads(data)
    except ValueError:
        reply = None
    if reply is None or not fits(reply):
        raise InputError(f"{wrong} (it says: {said(data, key)}): {repair}")
    return reply


def _message(reply: dict) -> str | None:
    """The message of a JSON error: OpenAI's and vLLM's error.message, TEI's error, older
    vLLM's message, FastAPI's detail (not a string: as JSON)."""
    error = reply.get("error")
    for value in (error.get("message") if isinstance(error, dict) else error,
                  reply.get("message"), reply.get("detail")):
        if isinstance(value, str) and value.strip():
            return value
        if value not in (None, ""):
            return json.dumps(value)
    return None


def refusal(status: int, data: bytes, key: Secrets, words: Words) -> str:
    """One line for a reply that no retry changes (a wrong model name, a bad key): what the
    server said (`said`: the key hidden) and the hint."""
    return (f"{words.where}: it answered {status} ({said(data, key)}): "
            f"{words.hints.get(status, words.hint)}")


# ---- a served model's endpoint ------------------------------------------------------------------
class Endpoint:
    """The client of one served model's JSON endpoint at `url` (embeddings, a reranker, the
    judge's chat): `at_once` connections kept (connection_pool), and `key` (the caller's,
    checked: models.api_key) sent only in the Authorization header, and kept to hide it from
    whatever a server echoes (`said`, core/secrets.redacted)."""

    def __init__(self, url: str, key: str | None, at_once: int) -> None:
        self.url, self.key = url, key
        self.pool = connection_pool(at_once)
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def post(self, body: bytes, bounds: Bounds, words: Words, most: int) -> bytes | None:
        """The body of the 200 reply to POSTing `body`, None when larger than `most` bytes
        (bounded_request: retried within `bounds`, any other outcome one line in `words`)."""
        return bounded_request(self.pool, "POST", self.url, body, self.headers, self.key,
                               bounds, words, most)

    def json_reply(self, data: bytes, fits: Callable[[Any], bool], wrong: str, repair: str) -> Any:
        """The reply's JSON value when `fits(value)`, else one line (json_reply: the key
        hidden in what the reply is shown to begin with)."""
        return json_reply(data, self.key, fits, wrong, repair)


# ---- several requests at once -----------------------------------------------------------------
def each_at_once(work: Callable[[T], R], items: Iterable[T], at_once: int) -> Iterator[R]:
    """`work(item)` of each of `items`, in their order, `at_once` running at a time on daemon
    threads. Once one fails, no further item starts; its exception is raised here, in its
    place, after the running ones end (each within its request's deadline: what they answer
    is kept). A KeyboardInterrupt (Ctrl-C) while waiting leaves the running ones behind:
    daemon threads, which the process does not wait for at its exit. Not
    concurrent.futures.ThreadPoolExecutor: its workers are no daemon threads (Python 3.9 on)
    and the interpreter joins them at its exit, so a Ctrl-C would wait out each held request
    to its deadline (tried: tests/core/test_posting.py's Ctrl-C test then outlives its 60 s)."""
    items = list(items)
    done: dict[int, tuple[Any, BaseException | None]] = {}
    ready = threading.Condition()
    state = {"next": 0, "stop": False}

    def worker() -> None:
        while True:
            with ready:
                if state["stop"] or state["next"] >= len(items):
                    return
                i = state["next"]
                state["next"] += 1
            try:
                outcome: tuple[Any, BaseException | None] = (work(items[i]), None)
            except BaseException as exc:  # raised in the caller's thread, in its place
                outcome = (None, exc)
            with ready:
                state["stop"] = state["stop"] or outcome[1] is not None
                done[i] = outcome
                ready.notify_all()

    threads = [threading.Thread(target=worker, daemon=True, name=f"request-{n}")
               for n in range(min(max(1, at_once), len(items)))]
    for thread in threads:
        thread.start()
    try:
        for i in range(len(items)):
            with ready:
                while i not in done:
                    ready.wait(POLL)
                value, error = done.pop(i)
            if error is not None:
                raise error
            yield value
    except Exception:
        with ready:
            state["stop"] = True
        for thread in threads:
            while thread.is_alive():
                thread.join(POLL)
        raise
    finally:
        with ready:
            state["stop"] = True


# ---- Retry-After --------------------------------------------------------------------------------
def retry_after(value: str | None) -> float | None:
    """Retry-After's seconds (a number of seconds, however large, or an HTTP date from now, 0
    when past); None when absent or unreadable."""
    text = (value or "").strip()
    if re.fullmatch(r"\d+(\.\d{1,6})?", text, re.ASCII):
        return float(text)  # inf past float's range: more than any wait
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_note(headers: Mapping[str, str], key: Secrets, max_wait: float
               ) -> tuple[float | None, str]:
    """(seconds a reply's Retry-After asks for, words for the log line): an invalid one is
    said (as a line may show a server's text: redacted of `key`), and ignored; one asking for
    more than `max_wait` seconds, the longest wait, is said with what the client does."""
    header = headers.get("Retry-After")
    seconds = retry_after(header)
    if header and seconds is None:
        return None, f" with an invalid Retry-After ({redacted(header, key, 40)!r}, ignored)"
    if seconds is not None and seconds > max_wait:
        asked = f"{seconds:,.0f}" if seconds < 1e15 else f"{seconds:.3g}"
        return seconds, (f" asking for a wait of {asked} s (Retry-After; more than the "
                         f"{max_wait:g} s the client waits at most)")
    return seconds, ""


# ---- one attempt at a file's bytes, its pace bounded --------------------------------------------
@dataclass(frozen=True)
class Stall:
    """The bound of an attempt at a file: its headers within `first` seconds (connection and
    redirects included), then at least `least` bytes of its body in every `window` seconds."""

    first: float
    window: float = STALL_WINDOW
    least: int = STALL_BYTES

    def __post_init__(self) -> None:
        _sane("first", self.first, MIN_LEFT)
        _sane("window", self.window, MIN_LEFT)
        _sane("least", self.least)

    def words(self) -> str:
        return f"stalled: fewer than {self.least:,} bytes in {self.window:g} s"


class NoAnswer(Exception):
    """An attempt at a file that got no answer or lost it (`note`: why, in words; `stalled`:
    by the pace bound, `answered`: after its headers came; `final`: what no retry changes, a
    malformed reply or a redirect not followed)."""

    def __init__(self, note: str, stalled: bool = False, answered: bool = False,
                 final: bool = False) -> None:
        super().__init__(note)
        self.note, self.stalled, self.answered, self.final = note, stalled, answered, final


class Stream:
    """The answer to a file's GET: `status`, `headers`, its body's `chunks` (as they arrive,
    the pace watched), `discard` (read to its end, for the next request) and `close`."""

    def __init__(self, response: urllib3.BaseHTTPResponse, watch: Watch, stall: Stall,
                 connect: float, read: float) -> None:
        self.response, self.watch, self.stall = response, watch, stall
        self.connect, self.read = connect, read
        self.status = response.status
        self.headers = response.headers

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives; NoAnswer once the pace fell below the bound or the
        connection broke (a body shorter than its Content-Length included)."""
        self.watch.pace(self.stall.window, self.stall.least)
        try:
            while block := self.response.read1(CHUNK, decode_content=False):
                self.watch.counted(len(block))
                yield block
        except urllib3.exceptions.HTTPError as exc:
            raise self._lost(exc) from None
        if self.watch.stalled:
            raise NoAnswer(self.stall.words(), stalled=True, answered=True)
        self.response.release_conn()

    def _lost(self, exc: Exception) -> NoAnswer:
        if self.watch.stalled:
            return NoAnswer(self.stall.words(), stalled=True, answered=True)
        return NoAnswer(type(exc).__name__, answered=True)

    def discard(self) -> None:
        """Read an unwanted body to its end so that the connection serves the next request."""
        try:
            self.response.drain_conn()
            self.response.release_conn()
        except urllib3.exceptions.HTTPError:
            self.response.close()

    def close(self) -> None:
        self.response.close()


REDIRECTS = (301, 302, 303, 307, 308)  # the statuses a file link's GET follows


@contextlib.contextmanager
def opened(pool: Pool, url: str, headers: Mapping[str, str], stall: Stall, connect: float,
           read: float, key: Secrets = None) -> Iterator[Stream]:
    """One GET of a file link (`headers`: a Range, never a secret) and its answer, streamed:
    redirects followed (MAX_REDIRECTS, to http(s) only, never back to a link of the same
    attempt), the whole attempt watched (Stall). No answer, or none in time: NoAnswer; a
    malformed reply or a redirect not followed: NoAnswer that is `final`. `key`: the secrets
    of the caller's other requests, which no line of this one shows."""
    if any(name.lower() in ("authorization", "cookie", "x-api-key") for name in headers):
        raise ValueError("a request carrying a secret never follows a redirect: "
                         "bounded_request is its way")
    with Watch(stall.first, key) as watch:
        target, visited = url, {url}
        while True:
            try:
                response = pool.request("GET", target, headers=dict(headers),
                                        preload_content=False, decode_content=False,
                                        redirect=False, retries=False,
                                        timeout=urllib3.Timeout(connect=connect, read=read))
            except urllib3.exceptions.HTTPError as exc:
                if watch.expired:
                    raise NoAnswer(f"no answer within {stall.first:g} s") from None
                wrong = malformed(exc)
                if wrong is not None:
                    raise NoAnswer(f"a malformed reply ({wrong})", final=True) from None
                raise NoAnswer(failure(exc, connect, read)) from None
            if watch.expired:  # its headers cut short by the watchdog
                response.close()
                raise NoAnswer(f"no answer within {stall.first:g} s")
            if response.status not in REDIRECTS:
                break
            try:
                target = _hop(target, response.status, response.headers.get("Location", ""),
                              visited, key)
            except NoAnswer:
                response.close()
                raise
            Stream(response, watch, stall, connect, read).discard()
            visited.add(target)
        stream = Stream(response, watch, stall, connect, read)
        try:
            yield stream
        finally:
            stream.close()


def _hop(target: str, status: int, location: str, visited: set[str], key: Secrets) -> str:
    """Where a file link's redirect from `target` leads (Location resolved against it), to
    follow; a redirect that no retry would follow otherwise is a `final` NoAnswer naming why
    (the link shown as a line shows a server's text: shown_location, redacted of `key`)."""
    said_status = f"HTTP {status}, a redirect"
    if not location.strip():
        raise NoAnswer(f"{said_status} that names no Location", final=True)
    shown = one_line(shown_location(redacted(location, key), target), SAID)
    try:
        following = urljoin(target, location.strip())
        scheme = urlsplit(following).scheme.lower()
    except ValueError:
        raise NoAnswer(f"{said_status} to a link that is not a URL ({shown})",
                       final=True) from None
    if scheme not in ("http", "https"):
        raise NoAnswer(f"{said_status} to a {redacted(scheme, key) or 'schemeless'}: link "
                       f"({shown}; only http and https are followed)", final=True)
    if following in visited:
        raise NoAnswer(f"{said_status} loop: back to a link it redirected from ({shown})",
                       final=True)
    if len(visited) > MAX_REDIRECTS:
        raise NoAnswer(f"HTTP {status}: more than {MAX_REDIRECTS} redirects in a row (the "
                       f"last to {shown})", final=True)
    return following


# ---- an endpoint's identity -----------------------------------------------------------------
def endpoint_identity(url: str) -> str:
    """`url` as the identity of an endpoint: its scheme and host lower-cased (neither tells
    one server from another: RFC 3986), the rest as given, so that HTTP://Host/v1 is the
    endpoint http://host/v1 was, and a URL already written so is unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    userinfo, at, hostport = parts.netloc.rpartition("@")
    return parts._replace(scheme=parts.scheme.lower(),
                          netloc=f"{userinfo}{at}{hostport.lower()}").geturl()
