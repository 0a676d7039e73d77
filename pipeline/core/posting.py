"""One JSON POST to an OpenAI-compatible endpoint, retried within bounds: the request loop the
served embeddings' client (encoding/served.py) and the judging assessor's chat client
(judging/chat.py) share, each with its own bounds (`Bounds`) and words (`Words`), their
connections (`connection_pool`) and the way they send several requests at once
(`each_at_once`).

Retries: a request answered 429 or 5xx (RETRIED), or whose connection dropped, is sent again
up to `retries` times, after the reply's Retry-After or an exponential backoff capped at
`max_wait`; a request not answered after `notice` seconds is said at once, in one line. A
redirect is not followed (the key would go where it points) and any other refusal is not
retried: each is one line naming the variable to change.

The deadline: a request takes at most `deadline` seconds by the wall clock, its attempts and
the waits between them, whatever the server does. Each attempt's timeouts are cut to what is
left; a reply is read as it arrives, the clock checked between reads; and a watchdog (`Watch`)
shuts the attempt's socket at the deadline, so that a server that trickles its headers or its
body (each byte restarts a socket's timeout) is given up on then too, in one line.

Secrets: the key goes only in the Authorization header the caller built. Whatever a server
says that a line shows (`said`: an error's message, the start of a reply that is not what was
asked) passes core/secrets.redacted: the key, in any of its forms, replaced in the whole text
before it is cut or collapsed, then any 4 of its characters in a row; a URL is shown with
core/secrets.shown_url.

Ctrl-C: requests run on daemon threads (`each_at_once`; bounded_post called from the main
thread sends its request from one too), which a KeyboardInterrupt leaves behind, and the main
thread waits for them looking at a Ctrl-C every POLL seconds: the stage ends within a second,
not when its requests in flight end (each within its deadline, or with the process).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from pipeline.core.errors import InputError
from pipeline.core.secrets import redacted

log = logging.getLogger(__name__)

RETRIED = (429, 500, 502, 503, 504)  # the statuses a request is sent again after
ERROR_BYTES = 1 << 16  # what an error reply's message is read from
SAID = 200  # characters of a server's message shown
MIN_LEFT = 0.001  # seconds an attempt's timeouts get at least (urllib3 refuses 0 and less)
CHUNK = 1 << 20  # bytes of a reply read at most at a time (what has arrived, up to this)
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


@dataclass(frozen=True)
class Bounds:
    """How often and how long one request is tried: `retries` after the first attempt, the
    first wait without Retry-After `backoff` seconds (doubled at each retry), no wait longer
    than `max_wait`, the timeouts `connect` and `read`, `deadline` seconds in all, the waiting
    line after `notice`; `pause` waits and `clock` keeps the deadline (the tests count the
    waits and move the clock with them)."""

    retries: int
    backoff: float
    max_wait: float
    connect: float
    read: float
    deadline: float
    notice: float
    pause: Callable[[float], None]
    clock: Callable[[], float]


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


# ---- the deadline's watchdog: the socket of an attempt shut when its time is up
class Watch:
    """One attempt's deadline while its connection is used, `left` seconds from now: then its
    socket is shut, so that a connect, send or read blocked on it returns at once (a server
    trickling its reply restarts every socket timeout), and `expired` says so. The
    connections of `connection_pool` tell the attempt of their thread (`current`) as they
    connect and send; leaving the `with` block ends the watch."""

    current = threading.local()  # .watch: the attempt under way in a thread

    def __init__(self, left: float) -> None:
        self.lock = threading.Lock()
        self.connection: HTTPConnection | None = None
        self.expired = self.over = False
        self.timer = threading.Timer(left, self._expire)
        self.timer.daemon = True

    def __enter__(self) -> Watch:
        Watch.current.watch = self
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        Watch.current.watch = None
        self.timer.cancel()
        with self.lock:
            self.over = True

    def using(self, connection: HTTPConnection) -> None:
        """The attempt's connection is `connection` (shut at once if the time is up)."""
        with self.lock:
            self.connection = connection
            if self.expired:
                _shut(connection)

    def _expire(self) -> None:
        with self.lock:
            if not self.over:
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


def connection_pool(maxsize: int) -> urllib3.PoolManager:
    """The clients' connections: `maxsize` kept per host, no retry of urllib3's own (bounded_post
    retries), each watched by its attempt's Watch."""
    pool = urllib3.PoolManager(maxsize=maxsize, retries=False)
    pool.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
    return pool


class _Late(Exception):
    """The deadline passed while a reply was read."""


def bounded_post(pool: urllib3.PoolManager, url: str, body: bytes, headers: Mapping[str, str],
                 key: str | None, bounds: Bounds, words: Words, most: int) -> bytes | None:
    """The body of the 200 reply to POSTing `body` to `url` (None: larger than `most` bytes,
    read no further), after at most `bounds.retries` retries, all within `bounds.deadline`
    seconds; anything else is one line (InputError, Refusal) in `words`. Called from the
    main thread, the request goes from a thread of its own (each_at_once), so that a Ctrl-C
    is seen at once, not when a read the system gave no signal to ends."""
    post = functools.partial(_post, pool, url, body, headers, key, bounds, words, most)
    if threading.current_thread() is not threading.main_thread():
        return post()
    (data,) = each_at_once(lambda _: post(), [None], 1)
    return data


def _post(pool: urllib3.PoolManager, url: str, body: bytes, headers: Mapping[str, str],
          key: str | None, bounds: Bounds, words: Words, most: int) -> bytes | None:
    """bounded_post's request, in the thread it is called from."""
    clock = bounds.clock
    deadline = clock() + bounds.deadline
    why, made = "no attempt", 0
    for attempt in range(bounds.retries + 1):
        if attempt and clock() >= deadline:  # a wait's pause overshot it: no attempt left
            break
        made, left = attempt + 1, max(deadline - clock(), MIN_LEFT)
        notice = threading.Timer(bounds.notice, _waiting, (bounds, words, deadline))
        notice.daemon = True
        if bounds.notice < left:  # else the deadline's line comes first
            notice.start()
        late = "no reply yet"  # what the deadline's line says, if it passes now
        try:
            with Watch(left) as watch:
                response = pool.request(
                    "POST", url, body=body, headers=headers, preload_content=False,
                    redirect=False, timeout=urllib3.Timeout(connect=min(bounds.connect, left),
                                                            read=min(bounds.read, left)))
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
                    _refuse(response, key, words)
                    wait = retry_after(response.headers.get("Retry-After"))
                finally:
                    response.close()
        except urllib3.exceptions.HTTPError as exc:  # refused, dropped, timed out, shut
            if watch.expired:
                raise InputError(_gave_up(bounds, words, late, made)) from None
            wait, why = None, f"the connection failed ({type(exc).__name__})"
        except _Late:
            raise InputError(_gave_up(bounds, words, late, made)) from None
        finally:
            notice.cancel()
        if attempt == bounds.retries:
            raise InputError(f"{words.where}: {why} after {bounds.retries} retries: check the "
                             f"server, then {words.again}")
        wait = min(bounds.max_wait, bounds.backoff * 2 ** attempt if wait is None else wait)
        if clock() + wait >= deadline:
            break
        log.warning(f"[{words.stage}] {words.where}: {why}; request sent again in {wait:g} s "
                    f"({attempt + 1} of {bounds.retries} retries)")
        bounds.pause(wait)
    raise InputError(f"{words.where}: {why}, and no reply within the {bounds.deadline:g} s a "
                     f"{words.span} may take ({_attempts(made)}): check the server, then "
                     f"{words.again}")


def _read(response: urllib3.BaseHTTPResponse, most: int, deadline: float,
          clock: Callable[[], float]) -> bytes | None:
    """A 200 reply's body, read as it arrives (CHUNK bytes at most at a time), the clock
    checked after each read (_Late once `deadline` has passed): None once it is larger than
    `most` bytes, by its Content-Length (unread) or as read."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > most:
        return None
    data = bytearray()
    while chunk := response.read1(CHUNK):
        data += chunk
        if len(data) > most:
            return None
        if clock() > deadline:
            raise _Late
    return bytes(data)


def _refuse(response: urllib3.BaseHTTPResponse, key: str | None, words: Words) -> None:
    """One line for a redirect (not followed) or a status no retry changes (a Refusal)."""
    status = response.status
    if 300 <= status < 400:
        target = redacted(response.headers.get("Location", ""), key, SAID) or "nowhere said"
        raise InputError(f"{words.where}: it answered {status}, a redirect to {target} (not "
                         f"followed): give {words.variable} the URL it redirects to, if it is "
                         "the endpoint")
    if status not in RETRIED:
        raise Refusal(refusal(status, response.read(ERROR_BYTES), key, words), status)


def _gave_up(bounds: Bounds, words: Words, late: str, made: int) -> str:
    """The line of a request whose deadline passed during its attempt number `made` (`late`:
    what it waited for)."""
    return (f"{words.where}: gave up after the {bounds.deadline:g} s a {words.span} may take, "
            f"{late} ({_attempts(made)}): check the server, then {words.again}")


def _attempts(made: int) -> str:
    return f"{made} attempt{'s' if made != 1 else ''}"


def _waiting(bounds: Bounds, words: Words, deadline: float) -> None:
    """The one line said when a request is not answered after `bounds.notice` seconds."""
    log.warning(f"[{words.stage}] {words.where}: waiting for {words.waiting} "
                f"({bounds.notice:g} s so far; the {words.span} gives up in "
                f"{max(0.0, deadline - bounds.clock()):.0f} s)")


def said(data: bytes, key: str | None) -> str:
    """What a server's reply says, as a line shows it (SAID characters at most): its JSON
    error's message (error.message, error, message or detail), else its text, decoded whole,
    the key and URL secrets replaced before it is cut (core/secrets.redacted)."""
    try:
        reply = json.loads(data)
    except ValueError:
        reply = None
    message = _message(reply) if isinstance(reply, dict) else None
    return redacted(message or data.decode(errors="replace"), key, SAID) or "nothing said"


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


def refusal(status: int, data: bytes, key: str | None, words: Words) -> str:
    """One line for a reply that no retry changes (a wrong model name, a bad key): what the
    server said (`said`: the key hidden) and the hint."""
    return (f"{words.where}: it answered {status} ({said(data, key)}): "
            f"{words.hints.get(status, words.hint)}")


# ---- several requests at once
def each_at_once(work: Callable[[T], R], items: Iterable[T], at_once: int) -> Iterator[R]:
    """`work(item)` of each of `items`, in their order, `at_once` running at a time on daemon
    threads. Once one fails, no further item starts; its exception is raised here, in its
    place, after the running ones end (each within its request's deadline: what they answer
    is kept). A KeyboardInterrupt (Ctrl-C) while waiting leaves the running ones behind:
    daemon threads, which the process does not wait for at its exit."""
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


def retry_after(value: str | None) -> float | None:
    """Retry-After's seconds (a number, or an HTTP date from now); None when absent or
    unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
