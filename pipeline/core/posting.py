"""One JSON POST to an OpenAI-compatible endpoint, retried within bounds: the request loop the
served embeddings' client (encoding/served.py) and the judging assessor's chat client
(judging/chat.py) share, each with its own bounds (`Bounds`) and words (`Words`).

A request answered 429 or 5xx (RETRIED), or whose connection dropped, is sent again up to
`retries` times, after the reply's Retry-After or an exponential backoff capped at `max_wait`,
all within `deadline` seconds (each attempt's timeouts cut to what is left); a request not
answered after `notice` seconds is said at once, in one line. A redirect is not followed (the
key would go where it points) and any other refusal is not retried: each is one line naming the
variable to change. The key goes only in the Authorization header the caller built; an error
reply that echoes it has it replaced by `<key>`, and a URL is shown with core/secrets.shown_url.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import urllib3

from pipeline.core.errors import InputError
from pipeline.core.secrets import shown_url

log = logging.getLogger(__name__)

RETRIED = (429, 500, 502, 503, 504)  # the statuses a request is sent again after
ERROR_BYTES = 1 << 16  # what an error reply's message is read from
SAID = 200  # characters of an error reply's message shown
MIN_LEFT = 0.001  # seconds an attempt's timeouts get at least (urllib3 refuses 0 and less)


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


def bounded_post(pool: urllib3.PoolManager, url: str, body: bytes, headers: Mapping[str, str],
                 key: str | None, bounds: Bounds, words: Words,
                 read: Callable[[urllib3.BaseHTTPResponse, float], bytes]) -> bytes:
    """The body of the 200 reply to POSTing `body` to `url`, read by `read(response,
    deadline)` (the caller's size bound), after at most `bounds.retries` retries within
    `bounds.deadline`; anything else is one line (InputError) in `words`."""
    clock = bounds.clock
    deadline = clock() + bounds.deadline
    why = "no attempt"
    for attempt in range(bounds.retries + 1):
        left = max(deadline - clock(), MIN_LEFT)  # a wait's pause may overshoot the deadline
        notice = threading.Timer(min(bounds.notice, left), _waiting, (bounds, words, deadline))
        notice.daemon = True
        notice.start()
        try:
            response = pool.request(
                "POST", url, body=body, headers=headers, preload_content=False,
                redirect=False, timeout=urllib3.Timeout(connect=min(bounds.connect, left),
                                                        read=min(bounds.read, left)))
            status, why = response.status, f"it answered {response.status}"
            try:  # a connection goes back to the pool only with its reply read whole
                if status == 200:
                    data = read(response, deadline)
                    response.release_conn()
                    return data
                if 300 <= status < 400:
                    target = shown_url(response.headers.get("Location", "")) or "nowhere said"
                    raise InputError(f"{words.where}: it answered {status}, a redirect to "
                                     f"{target} (not followed): give {words.variable} the URL "
                                     "it redirects to, if it is the endpoint")
                if status not in RETRIED:
                    raise InputError(refusal(status, response.read(ERROR_BYTES), key, words))
                wait = retry_after(response.headers.get("Retry-After"))
            finally:
                response.close()
        except urllib3.exceptions.HTTPError as exc:  # refused, dropped, timed out
            wait, why = None, f"the connection failed ({type(exc).__name__})"
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
                     f"{words.span} may take ({attempt + 1} attempts): check the server, then "
                     f"{words.again}")


def _waiting(bounds: Bounds, words: Words, deadline: float) -> None:
    """The one line said when a request is not answered after `bounds.notice` seconds."""
    log.warning(f"[{words.stage}] {words.where}: waiting for {words.waiting} "
                f"({bounds.notice:g} s so far; the {words.span} gives up in "
                f"{max(0.0, deadline - bounds.clock()):.0f} s)")


def hidden(text: str, key: str | None) -> str:
    """`text` with the key, where a careless server echoed it, replaced by `<key>`."""
    return text.replace(key, "<key>") if key else text


def refusal(status: int, data: bytes, key: str | None, words: Words) -> str:
    """One line for a reply that no retry changes (a wrong model name, a bad key): the
    server's message (its JSON error's, else its first bytes; the key hidden) and the hint."""
    try:
        message = json.loads(data).get("error", {})
        message = message.get("message", "") if isinstance(message, dict) else str(message)
    except (ValueError, AttributeError):
        message = ""
    said = hidden(" ".join(str(message or data[:SAID].decode(errors="replace")).split()), key)
    return (f"{words.where}: it answered {status} ({said[:SAID]}): "
            f"{words.hints.get(status, words.hint)}")


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
