"""Served models: papers embedded by an OpenAI-compatible `/v1/embeddings` endpoint (vLLM,
TEI, infinity, commercial APIs), `MODEL=api:<model>` with `EMBEDDINGS_URL` (docs/encoders.md,
"Served models").

The embed stage runs it like any encoder: its store, parts (checkpoints: a killed run asks
again only for the papers of the part it was writing) and SLURM shards are the embed stage's.
Each part's texts go out `batch_size` per request, `concurrency` requests at once; a request
answered 429 or 5xx, or whose connection dropped, is sent again up to RETRIES times, after the
reply's Retry-After or an exponential backoff. A reply that cannot be the inputs' embeddings
(another count, indices, dimension) is refused in one line, nothing of its part stored. The key
is read from OPENAI_API_KEY at each run and sent only in the Authorization header: it is never
logged, never written, and no part of the store's identity (the endpoint and model name are).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime

import numpy as np
import urllib3

from pipeline.core.errors import InputError
from pipeline.core.logs import Progress
from pipeline.encoding.objects import ObjectEncoder
from pipeline.models import API_KEY, API_KIND, API_URL, ModelEntry, ServedModel

log = logging.getLogger(__name__)

RETRIES = 5  # a request's retries after a 429, a 5xx or a dropped connection
BACKOFF = 1.0  # seconds before the first retry without Retry-After, doubled at each
MAX_WAIT = 120.0  # the longest wait, whatever Retry-After asks
TIMEOUT = urllib3.Timeout(connect=10.0, read=300.0)  # a batch of long inputs on a busy server
RETRIED = (429, 500, 502, 503, 504)
pause = time.sleep  # how a retry waits (the tests count the waits instead)


class Remote:
    """Where a served model runs, as the embed stage records a device: not on this machine
    (its token budget is the CPU's, unused: requests are cut by `batch_size`)."""

    type = "remote"

    def __str__(self) -> str:
        return "remote (the endpoint's)"


class EmbeddingsClient:
    """Requests to one endpoint for one model: `encode(texts)` is their vectors, in order."""

    def __init__(self, entry: ServedModel, key: str | None) -> None:
        self.entry = entry
        self.pool = urllib3.PoolManager(maxsize=entry.concurrency, retries=False,
                                        timeout=TIMEOUT)
        self.headers = {"Content-Type": "application/json"}
        self.key = key  # kept to blank it out of an error the server echoes it in
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        self.dim: int | None = None  # set by the first reply; every later one must match
        self.tokens = 0  # usage.prompt_tokens summed over the replies that give it
        self.lock = threading.Lock()  # dim and tokens, set by concurrent requests

    def where(self) -> str:
        return f"MODEL {self.entry.name} at {self.entry.endpoint}"

    def encode(self, texts: list[str]) -> np.ndarray:
        """The endpoint's vectors of `texts` (one request, retried), float32, in order."""
        body = json.dumps({"model": self.entry.hf_id, "input": texts,
                           "encoding_format": "float"}).encode()
        return self._vectors(self._reply(body), len(texts))

    def _reply(self, body: bytes) -> dict:
        """The JSON reply to one request, after at most RETRIES retries."""
        for attempt in range(RETRIES + 1):
            try:
                response = self.pool.request("POST", self.entry.endpoint, body=body,
                                             headers=self.headers)
            except urllib3.exceptions.HTTPError as exc:  # refused, dropped, timed out
                status, wait, why = None, None, f"the connection failed ({type(exc).__name__})"
            else:
                status, why = response.status, f"it answered {response.status}"
                if status == 200:
                    return self._json(response.data)
                if status not in RETRIED:
                    raise InputError(self._refusal(status, response.data))
                wait = retry_after(response.headers.get("Retry-After"))
            if attempt == RETRIES:
                break
            wait = min(MAX_WAIT, BACKOFF * 2 ** attempt if wait is None else wait)
            log.warning(f"[embed] {self.where()}: {why}; request sent again in {wait:g} s "
                        f"({attempt + 1} of {RETRIES} retries)")
            pause(wait)
        raise InputError(f"{self.where()}: {why} after {RETRIES} retries: check the server, "
                         "then embed again (the papers stored so far are kept)")

    def _refusal(self, status: int, data: bytes) -> str:
        """One line for a reply that no retry changes (a wrong model name, a bad key)."""
        try:
            message = json.loads(data).get("error", {})
            message = message.get("message", "") if isinstance(message, dict) else str(message)
        except (ValueError, AttributeError):
            message = ""
        said = " ".join(str(message or data[:200].decode(errors="replace")).split())
        if self.key:
            said = said.replace(self.key, "<key>")
        said = said[:200]
        hint = {401: f"set {API_KEY} to the endpoint's key", 403: f"set {API_KEY} to a key "
                 "allowed this model", 404: f"give {API_URL} the whole URL (.../v1/embeddings) "
                 "and the model's name as the endpoint serves it", 413: "lower "
                 "EMBEDDINGS_BATCH to the endpoint's limit"}.get(
            status, "check the model's name and the endpoint's limits (EMBEDDINGS_BATCH: "
            "inputs per request)")
        return f"{self.where()}: it answered {status} ({said}): {hint}"

    def _json(self, data: bytes) -> dict:
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or not isinstance(reply.get("data"), list):
            raise InputError(f"{self.where()}: its reply is not an embeddings list (JSON with "
                             f"data[]): give {API_URL} the /v1/embeddings URL of an "
                             "OpenAI-compatible server")
        return reply

    def _vectors(self, reply: dict, n: int) -> np.ndarray:
        """The reply's embeddings placed by their `index`: each of 0..n-1 exactly once, of
        one dimension, the same in every reply."""
        items = reply["data"]
        try:
            index = [int(item["index"]) for item in items]
            vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{self.where()}: its reply's data[] items are not "
                             "{index, embedding as a list of numbers}: embed with a server "
                             "that speaks OpenAI's embeddings protocol") from None
        if sorted(index) != list(range(n)):
            raise InputError(f"{self.where()}: {len(items)} embeddings (indices "
                             f"{sorted(set(index))[:5]}...) came back for {n} inputs: the "
                             "endpoint dropped or repeated inputs; lower EMBEDDINGS_BATCH to "
                             "its limit")
        dim = vectors.shape[1] if vectors.ndim == 2 else 0
        usage = reply.get("usage")
        with self.lock:
            if not dim or self.dim not in (None, dim):
                raise InputError(f"{self.where()}: embeddings of {dim or 'no'} dimensions "
                                 f"after {self.dim}: the endpoint must serve one model of one "
                                 "dimension (is another model behind it?)")
            self.dim = dim
            if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
                self.tokens += usage["prompt_tokens"]
        out = np.empty_like(vectors)
        out[index] = vectors
        return out


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


def served_entry(entry: ModelEntry) -> ServedModel:
    """`entry` if it is a served model with its endpoint, else one line saying what to give."""
    if not isinstance(entry, ServedModel):
        raise InputError(f"MODEL {entry.name} is a {entry.kind} model, not a served one "
                         "(api:<model>)")
    if not entry.endpoint:
        raise InputError(f"MODEL {entry.name} is served: give {API_URL}, its endpoint's URL "
                         "(e.g. http://127.0.0.1:8000/v1/embeddings)")
    return entry


class ServedEncoder(ObjectEncoder):
    """What the embed stage calls to embed a served model's papers: an ObjectEncoder (its
    input format "title abstract", its checks) whose object is the endpoint's client, called
    for up to `concurrency` batches at once."""

    kinds: tuple[str, ...] = (API_KIND,)

    def __init__(self, entry: ModelEntry, model_path: str | None = None,
                 device: str | None = None) -> None:
        served_entry(entry)
        if model_path is not None or device is not None:
            raise InputError(f"MODEL {entry.name} is served by {entry.endpoint}: it has no "
                             "MODEL_PATH or device here; leave them out")
        self.entry = entry
        self.obj = EmbeddingsClient(entry, os.environ.get(API_KEY))
        self.device = Remote()
        self.compute_dtype = "the endpoint's"
        self.max_length = None  # the endpoint truncates as it is configured to
        self.task_metadata = None  # no MTEB task: the client is called with the texts
        self.dim = self._vectors(["dimension probe"]).shape[1]

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        """Nothing beyond the entry (its endpoint and model name); a store is never checked
        against an entry without an endpoint (whose settings would differ from any store's)."""
        served_entry(entry)
        return {}

    def encode_ids(self, texts: list[str], token_budget: int | None = None,
                   max_batch: int | None = None, progress: bool | Progress = True
                   ) -> tuple[np.ndarray, int]:
        """Vectors of `texts` in their order, `batch_size` texts per request, `concurrency`
        requests at once, and the tokens the endpoint counted (usage.prompt_tokens)."""
        entry: ServedModel = self.entry  # type: ignore[assignment]
        size, before = entry.batch_size, self.obj.tokens
        bar = progress if isinstance(progress, Progress) else Progress(
            len(texts), "embed", "papers", show=progress)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), size)
        with ThreadPoolExecutor(entry.concurrency) as pool:
            # map yields in order; a failed batch raises here, its part never written
            for lo, vectors in zip(starts, pool.map(
                    lambda lo: self._vectors(texts[lo:lo + size]), starts), strict=True):
                out[lo:lo + size] = vectors
                bar.update(len(vectors))
        if bar is not progress:
            bar.close()
        return out, self.obj.tokens - before
