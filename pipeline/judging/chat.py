"""The judging assessor's client: one chat completion at a time from an OpenAI-compatible
`/v1/chat/completions` endpoint (vLLM, TGI, llama.cpp, Ollama, commercial APIs), JUDGE_URL
(docs/judging.md).

It follows the served embeddings' client (pipeline/encoding/served.py) and shares its rules:
the key is read from OPENAI_API_KEY (models.api_key: checked, never shown) and sent only in the
Authorization header; JUDGE_URL is checked as EMBEDDINGS_URL is (models.endpoint_url: no user,
password, query or fragment, so that the URL recorded with the judgments holds no secret) and
shown with core/secrets.shown_url; whatever a server says (a reply's content, an error, the
start of a reply that is not a chat completion) passes core/secrets.redacted, the key in any
form and any 4 of its characters in a row replaced by `<key>`, before anything keeps or shows
it. Its request loop is the embeddings client's (core/http.bounded_request): a request
answered 429 or 5xx, or whose connection dropped, is sent again up to RETRIES times, after
the reply's Retry-After or an exponential backoff capped at MAX_WAIT, all within DEADLINE
seconds by the wall clock, a reply still arriving then included; any other refusal, a
redirect (not followed: the key would go where it points) or a reply that is not a chat
completion is one line naming JUDGE_URL and what to change.
"""

from __future__ import annotations

import json
import logging
import time
from typing import NamedTuple
from urllib.parse import urlsplit

from pipeline.core.errors import InputError
from pipeline.core.http import (
    Bounds,
    Endpoint,
    Words,
    endpoint_identity,
    said,
)
from pipeline.core.secrets import redacted, shown_url
from pipeline.models import API_CONCURRENCY, API_LIMITS, KEY_HINTS, endpoint_url

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
# A refusal's repair by status (any other: HINT)
HINTS = {**KEY_HINTS,
         404: f"give {JUDGE_URL} the server's address and the model's name as it serves it "
              "(JUDGE=api:<model>)"}
HINT = "check the model's name and the endpoint's limits"
pause = time.sleep  # how a retry waits (the tests count the waits instead)
clock = time.monotonic  # how the deadline is kept (the tests move it with their waits)


def chat_url(url: str) -> str:
    """The chat completions URL that JUDGE_URL names: a server's address
    (http://host:port), its OpenAI base (…/v1) or the whole URL (…/chat/completions), checked
    as EMBEDDINGS_URL is (models.endpoint_url), its scheme and host lower-cased: the endpoint's
    identity (core/http.endpoint_identity), which the judgments record and compare, so that
    HTTP://Host is the endpoint http://host was."""
    url = endpoint_identity(endpoint_url(url, JUDGE_URL, "http://127.0.0.1:8000"))
    path = urlsplit(url).path.rstrip("/")
    base = url.rstrip("/")
    if path.endswith("/chat/completions"):
        return base
    if path.endswith("/v1"):
        return base + "/chat/completions"
    return base + CHAT_PATH


class Completion(NamedTuple):
    """A chat completion as the assessor reads it: the first choice's content and the model
    the reply names (None when it names none)."""

    content: str
    model: str | None


class ChatClient(Endpoint):
    """Chat completions of one `model` at `url` (chat_url's), the Authorization header
    carrying `key` (checked: models.api_key)."""

    def __init__(self, url: str, model: str, key: str | None) -> None:
        super().__init__(url, key, API_LIMITS[API_CONCURRENCY])  # JUDGE_CONCURRENCY's bound
        self.model = model

    def where(self) -> str:
        return f"JUDGE api:{self.model} at {shown_url(self.url)}"

    def hide(self, text: str) -> str:
        """`text`, a server's, with the key (any part of it) and URL secrets replaced."""
        return redacted(text, self.key)

    def complete(self, messages: list[dict[str, str]], temperature: float,
                 max_tokens: int) -> Completion:
        """The first choice's message content, raw (the key replaced; '' when the reply has
        none, as for a refusal or a tool call), and the model the reply names, as it names it
        (compared with JUDGE's before anything keeps it; shown through `hide`): one request,
        retried."""
        body = json.dumps({"model": self.model, "messages": messages,
                           "temperature": temperature, "max_tokens": max_tokens}).encode()
        data = self._reply(body)
        reply = self._json(data)
        choices = reply.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise InputError(f"{self.where()}: its reply holds no choices[0].message (it "
                             f"says: {said(data, self.key)}): give {JUDGE_URL} the address of "
                             "a server that speaks OpenAI's chat completions protocol")
        content, model = message.get("content"), reply.get("model")
        return Completion(self.hide(content) if isinstance(content, str) else "",
                          model if isinstance(model, str) else None)

    def _reply(self, body: bytes) -> bytes:
        """The body of the reply to one request (core/http.bounded_request: RETRIES retries,
        all within DEADLINE seconds), MAX_REPLY bytes at most: a larger one is refused in one
        line, read no further."""
        bounds = Bounds(RETRIES, BACKOFF, MAX_WAIT, CONNECT, READ, DEADLINE, NOTICE, pause, clock)
        words = Words("judge", self.where(), JUDGE_URL, "request", "a reply",
                      "judge again (the pairs judged so far are kept)", HINTS, HINT)
        data = self.post(body, bounds, words, MAX_REPLY)
        if data is None:
            raise InputError(f"{self.where()}: its reply is larger than {MAX_REPLY:,} bytes, "
                             f"more than a grade takes: give {JUDGE_URL} a chat completions "
                             "endpoint")
        return data

    def _json(self, data: bytes) -> dict:
        """The reply as a JSON object (core/http.json_reply)."""
        return self.json_reply(data, lambda reply: isinstance(reply, dict),
                               f"{self.where()}: its reply is not JSON",
                               f"give {JUDGE_URL} the address of a server that speaks "
                               "OpenAI's chat completions protocol")
