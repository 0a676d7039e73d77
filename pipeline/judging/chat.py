"""The judging assessor's client: one chat completion at a time from an OpenAI-compatible
`/v1/chat/completions` endpoint (vLLM, TGI, llama.cpp, Ollama, commercial APIs), JUDGE_URL
(docs/judging.md).

It follows the served embeddings' client (pipeline/encoding/served.py) and shares its rules:
the key is read from OPENAI_API_KEY (models.api_key: checked, never shown) and sent only in the
Authorization header; JUDGE_URL is checked as EMBEDDINGS_URL is (models.endpoint_url: no user,
password, query or fragment, so that the URL recorded with the judgments holds no secret) and
shown with core/secrets.shown_url; a reply or error that echoes the key has it replaced by
`<key>` before anything keeps or shows it. A request answered 429 or 5xx, or whose connection
dropped, is sent again up to RETRIES times, after the reply's Retry-After or an exponential
backoff capped at MAX_WAIT, all within DEADLINE seconds; any other refusal, a redirect (not
followed: the key would go where it points) or a reply that is not a chat completion is one
line naming JUDGE_URL and what to change.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from urllib.parse import urlsplit

import urllib3

from pipeline.core.errors import InputError
from pipeline.core.secrets import shown_url
from pipeline.encoding.served import RETRIED, retry_after
from pipeline.models import API_KEY, endpoint_url

log = logging.getLogger(__name__)

JUDGE_URL = "JUDGE_URL"  # the variable naming the chat endpoint
CHAT_PATH = "/v1/chat/completions"
RETRIES = 5  # a request's retries after a 429, a 5xx or a dropped connection
BACKOFF = 1.0  # seconds before the first retry without Retry-After, doubled at each
MAX_WAIT = 60.0  # the longest wait, whatever Retry-After asks
CONNECT, READ = 10.0, 120.0  # seconds: one pair's grade is a short reply
DEADLINE = 300.0  # seconds one request may take in all, its attempts and the waits between
NOTICE = 30.0  # seconds after which a request not yet answered is said, once
MAX_REPLY = 1 << 20  # bytes of a reply read at most (a grade is a few dozen)
ERROR_BYTES = 1 << 16  # what an error reply's message is read from
pause = time.sleep  # how a retry waits (the tests count the waits instead)
clock = time.monotonic  # how the deadline is kept (the tests move it with their waits)


def chat_url(url: str) -> str:
    """The chat completions URL that JUDGE_URL names: a server's address
    (http://host:port), its OpenAI base (…/v1) or the whole URL (…/chat/completions), checked
    as EMBEDDINGS_URL is (models.endpoint_url)."""
    endpoint_url(url, JUDGE_URL, "http://127.0.0.1:8000")
    path = urlsplit(url).path.rstrip("/")
    base = url.rstrip("/")
    if path.endswith("/chat/completions"):
        return base
    if path.endswith("/v1"):
        return base + "/chat/completions"
    return base + CHAT_PATH


class ChatClient:
    """Chat completions of one `model` at `url` (chat_url's), the Authorization header
    carrying `key` (checked: models.api_key)."""

    def __init__(self, url: str, model: str, key: str | None) -> None:
        self.url, self.model, self.key = url, model, key
        self.pool = urllib3.PoolManager(maxsize=8, retries=False)
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def where(self) -> str:
        return f"JUDGE api:{self.model} at {shown_url(self.url)}"

    def hide(self, text: str) -> str:
        """`text` with the key, where a careless server echoed it, replaced by `<key>`."""
        return text.replace(self.key, "<key>") if self.key else text

    def complete(self, messages: list[dict[str, str]], temperature: float,
                 max_tokens: int) -> str:
        """The first choice's message content, raw (the key replaced; '' when the reply has
        none, as for a refusal or a tool call): one request, retried."""
        body = json.dumps({"model": self.model, "messages": messages,
                           "temperature": temperature, "max_tokens": max_tokens}).encode()
        reply = self._reply(body)
        choices = reply.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise InputError(f"{self.where()}: its reply holds no choices[0].message: give "
                             f"{JUDGE_URL} the address of a server that speaks OpenAI's chat "
                             "completions protocol")
        content = message.get("content")
        return self.hide(content) if isinstance(content, str) else ""

    def _reply(self, body: bytes) -> dict:
        """The JSON reply to one request, after at most RETRIES retries, all within DEADLINE
        seconds (each attempt's timeouts cut to what is left)."""
        deadline = clock() + DEADLINE
        why = "no attempt"
        for attempt in range(RETRIES + 1):
            left = max(deadline - clock(), 0.001)
            notice = threading.Timer(min(NOTICE, left), self._waiting, (deadline,))
            notice.daemon = True
            notice.start()
            try:
                response = self.pool.request(
                    "POST", self.url, body=body, headers=self.headers, preload_content=False,
                    redirect=False,
                    timeout=urllib3.Timeout(connect=min(CONNECT, left), read=min(READ, left)))
                status, why = response.status, f"it answered {response.status}"
                try:  # a connection goes back to the pool only with its reply read whole
                    if status == 200:
                        data = response.read(MAX_REPLY + 1)
                        if len(data) > MAX_REPLY:
                            raise InputError(f"{self.where()}: its reply is larger than "
                                             f"{MAX_REPLY:,} bytes, more than a grade takes: "
                                             f"give {JUDGE_URL} a chat completions endpoint")
                        response.release_conn()
                        return self._json(data)
                    if 300 <= status < 400:
                        target = shown_url(response.headers.get("Location", "")) or "nowhere"
                        raise InputError(f"{self.where()}: it answered {status}, a redirect to "
                                         f"{target} (not followed): give {JUDGE_URL} the URL "
                                         "it redirects to, if it is the endpoint")
                    if status not in RETRIED:
                        raise InputError(self._refusal(status, response.read(ERROR_BYTES)))
                    wait = retry_after(response.headers.get("Retry-After"))
                finally:
                    response.close()
            except urllib3.exceptions.HTTPError as exc:  # refused, dropped, timed out
                wait, why = None, f"the connection failed ({type(exc).__name__})"
            finally:
                notice.cancel()
            if attempt == RETRIES:
                raise InputError(f"{self.where()}: {why} after {RETRIES} retries: check the "
                                 "server, then judge again (the pairs judged so far are kept)")
            wait = min(MAX_WAIT, BACKOFF * 2 ** attempt if wait is None else wait)
            if clock() + wait >= deadline:
                break
            log.warning(f"[judge] {self.where()}: {why}; request sent again in {wait:g} s "
                        f"({attempt + 1} of {RETRIES} retries)")
            pause(wait)
        raise InputError(f"{self.where()}: {why}, and no reply within the {DEADLINE:g} s a "
                         f"request may take ({attempt + 1} attempts): check the server, then "
                         "judge again (the pairs judged so far are kept)")

    def _waiting(self, deadline: float) -> None:
        """The one line said when a request is not answered after NOTICE seconds."""
        log.warning(f"[judge] {self.where()}: waiting for a reply ({NOTICE:g} s so far; the "
                    f"request gives up in {max(0.0, deadline - clock()):.0f} s)")

    def _refusal(self, status: int, data: bytes) -> str:
        """One line for a reply that no retry changes (a wrong model name, a bad key)."""
        try:
            message = json.loads(data).get("error", {})
            message = message.get("message", "") if isinstance(message, dict) else str(message)
        except (ValueError, AttributeError):
            message = ""
        said = self.hide(" ".join(str(message or data[:200].decode(errors="replace")).split()))
        hint = {401: f"set {API_KEY} to the endpoint's key",
                403: f"set {API_KEY} to a key allowed this model",
                404: f"give {JUDGE_URL} the server's address and the model's name as it "
                     "serves it (JUDGE=api:<model>)"}.get(
            status, "check the model's name and the endpoint's limits")
        return f"{self.where()}: it answered {status} ({said[:200]}): {hint}"

    def _json(self, data: bytes) -> dict:
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise InputError(f"{self.where()}: its reply is not JSON: give {JUDGE_URL} the "
                             "address of a server that speaks OpenAI's chat completions "
                             "protocol")
        return reply
