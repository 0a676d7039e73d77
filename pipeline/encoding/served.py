"""Served models: papers embedded by an OpenAI-compatible `/v1/embeddings` endpoint (vLLM,
TEI, infinity, commercial APIs), `MODEL=api:<model>` with `EMBEDDINGS_URL` (docs/encoders.md,
"Served models").

The embed stage runs it like any encoder: its store, parts (checkpoints: a killed run asks
again only for the papers of the part it was writing) and SLURM shards are the embed stage's.
Each part's texts go out `batch_size` per request, `concurrency` requests at once; a request
answered 429 or 5xx, or whose connection dropped, is sent again up to RETRIES times, after the
reply's Retry-After or an exponential backoff, all within a batch's DEADLINE; a request not
answered after NOTICE seconds is said at once (core/http.bounded_request, the loop the judging
chat client shares). DEADLINE holds by the wall clock while a reply is read (a server sending
it a byte at a time is given up on then), and a Ctrl-C ends the stage at once (the requests
in flight are left behind: core/http.each_at_once). A reply is read as it arrives up to the
size its inputs' embeddings can take. A reply that cannot be the inputs' embeddings (another
count, indices, dimension, a value that is not a JSON number or beyond float32) is refused in
one line, nothing of its part stored. The key is read from OPENAI_API_KEY at each run
(checked: models.api_key) and sent only in the Authorization header: it is never logged,
never written, and no part of the store's identity; what a server says that a line shows
passes core/secrets.redacted first (core/http.said).

An endpoint's identity is its URL (recorded as given: models.endpoint_url refuses one that
holds a secret), the served model's name and its fingerprint, the vectors of PROBES: each run
that sends requests (papers embedded, queries encoded) sends the probes first, and a store
filled by another model under the same name is refused (`identity_change`: the URL, without
a request; `ServedEncoder.probe_change`: the dimension and the probes' vectors, within
MIN_COSINE: servers are not bit-exact across batch shapes and hardware).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time

import numpy as np

from pipeline.core.errors import InputError
from pipeline.core.http import (
    Bounds,
    Endpoint,
    Words,
    each_at_once,
    endpoint_identity,
)
from pipeline.core.logs import Progress
from pipeline.core.secrets import shown_url
from pipeline.encoding.objects import ObjectEncoder
from pipeline.models import (
    API_KIND,
    API_URL,
    KEY_HINTS,
    SERVED_URLS,
    ModelEntry,
    ServedModel,
    api_key,
)

log = logging.getLogger(__name__)

RETRIES = 5  # a request's retries after a 429, a 5xx or a dropped connection
BACKOFF = 1.0  # seconds before the first retry without Retry-After, doubled at each
MAX_WAIT = 120.0  # the longest wait, whatever Retry-After asks
CONNECT, READ = 10.0, 300.0  # seconds: a batch of long inputs on a busy server may take long
DEADLINE = 600.0  # seconds a batch may take in all, its attempts and the waits between them
NOTICE = 30.0  # seconds after which a request not yet answered is said, once
# A reply's size bound: VALUE_BYTES per number asked for (a JSON float is about 20 bytes, a
# pretty-printed one 30), ITEM_BYTES per input (index, object), REPLY_SLACK for the rest;
# until the first reply gives the dimension, MAX_DIM numbers per input
MAX_DIM, VALUE_BYTES, ITEM_BYTES, REPLY_SLACK = 16_384, 64, 1_024, 1 << 20
FLOAT32_MAX = float(np.finfo(np.float32).max)
JSON_NAMES = {bool: "true or false", str: "a string", type(None): "null", list: "a list",
              dict: "an object"}  # what a value that is not a number is, in the reply's words
# The fingerprint's texts (docs/encoders.md, "Served models"), sent in one request at every run
# that sends requests; their vectors are recorded in the store's config, rounded to DIGITS
PROBES = ("Citation recommendation with transformer-based document encoders.",
          "Aspirin and the risk of cardiovascular events: a randomized controlled trial.",
          "Graph neural networks predict protein structure from sequence.",
          "Large-scale evaluation of retrieval models on millions of candidate papers.")
DIGITS = 6
# The same model, each probe's cosine with the recorded vector (measured on MiniLM, CPU:
# another batch shape 1 - 1e-7, float16 1 - 1e-6, bfloat16 1 - 2e-5; another model, or the
# same one's vectors rotated 10%, 0.994 and below)
MIN_COSINE = 0.999
# A refusal's repair by status (any other: HINT)
HINTS = {**KEY_HINTS,
         404: f"give {API_URL} the whole URL (the server's path: docs/encoders.md, Served "
              "models) and the model's name as the endpoint serves it",
         413: "lower EMBEDDINGS_BATCH to the endpoint's limit"}
HINT = "check the model's name and the endpoint's limits (EMBEDDINGS_BATCH: inputs per request)"
pause = time.sleep  # how a retry waits (the tests count the waits instead)
clock = time.monotonic  # how the deadline is kept (the tests move it with their waits)


class Remote:
    """Where a served model runs, as the embed stage records a device: not on this machine
    (its token budget is the CPU's, unused: requests are cut by `batch_size`)."""

    type = "remote"

    def __str__(self) -> str:
        return "remote (the endpoint's)"


class EmbeddingsClient(Endpoint):
    """Requests to one endpoint for one model: `encode(texts)` is their vectors, in order.
    `key`: the key the Authorization header carries, checked (models.api_key)."""

    def __init__(self, entry: ServedModel, key: str | None) -> None:
        super().__init__(entry.endpoint, key, entry.concurrency)
        self.entry = entry
        self.dim: int | None = None  # set by the first reply; every later one must match
        self.tokens = 0  # usage.prompt_tokens summed over the replies that give it
        self.lock = threading.Lock()  # dim and tokens, set by concurrent requests

    def where(self) -> str:
        return f"MODEL {self.entry.name} at {self.entry.endpoint}"

    def encode(self, texts: list[str]) -> np.ndarray:
        """The endpoint's vectors of `texts` (one request, retried), float32, in order."""
        body = json.dumps({"model": self.entry.hf_id, "input": texts,
                           "encoding_format": "float"}).encode()
        return self._vectors(self._reply(body, len(texts)), len(texts))

    def _reply(self, body: bytes, n: int) -> dict:
        """The JSON reply to one request of `n` inputs (core/http.bounded_request: RETRIES
        retries, all within DEADLINE seconds), read up to the size of `n` inputs' embeddings
        (`n` x the dimension, or MAX_DIM before it is known, x VALUE_BYTES, plus ITEM_BYTES
        each and REPLY_SLACK): a larger reply is refused in one line, read no further."""
        bounds = Bounds(RETRIES, BACKOFF, MAX_WAIT, CONNECT, READ, DEADLINE, NOTICE, pause, clock)
        words = Words("embed", self.where(), API_URL, "batch",
                      f"the reply to a request of {n} inputs",
                      "embed again (the papers stored so far are kept)", HINTS, HINT)
        bound = n * ((self.dim or MAX_DIM) * VALUE_BYTES + ITEM_BYTES) + REPLY_SLACK
        data = self.post(body, bounds, words, bound)
        if data is None:
            raise InputError(f"{self.where()}: its reply to {n} inputs is larger than "
                             f"{bound:,} bytes, more than {n} embeddings of "
                             f"{self.dim or f'up to {MAX_DIM:,}'} dimensions can be: embed "
                             "with a server that speaks OpenAI's embeddings protocol")
        return self._json(data)

    def _json(self, data: bytes) -> dict:
        """The reply as JSON with data[] (core/http.json_reply)."""
        return self.json_reply(data, lambda reply: isinstance(reply, dict) and
                               isinstance(reply.get("data"), list),
                               f"{self.where()}: its reply is not an embeddings list (JSON "
                               "with data[])", f"give {API_URL} the embeddings URL of an "
                               "OpenAI-compatible server")

    def _vectors(self, reply: dict, n: int) -> np.ndarray:
        """The reply's embeddings placed by their `index`: each of 0..n-1 exactly once, of
        one dimension, the same in every reply; every value a JSON number (true is not one)
        that float32 holds."""
        items = reply["data"]
        if not all(isinstance(item, dict) and type(item.get("index")) is int
                   and isinstance(item.get("embedding"), list) for item in items):
            raise InputError(f"{self.where()}: its reply's data[] items are not "
                             "{index, embedding as a list of numbers}: embed with a server "
                             "that speaks OpenAI's embeddings protocol")
        index = [item["index"] for item in items]
        rows = [item["embedding"] for item in items]
        odd = next((kind for row in rows for kind in set(map(type, row))
                    if kind not in (int, float)), None)
        if odd is not None:
            raise InputError(f"{self.where()}: its reply's embeddings hold "
                             f"{JSON_NAMES.get(odd, odd.__name__)} where numbers belong: "
                             "embed with a server that speaks OpenAI's embeddings protocol")
        if sorted(index) != list(range(n)):
            raise InputError(f"{self.where()}: {len(items)} embeddings (indices "
                             f"{sorted(set(index))[:5]}...) came back for {n} inputs: the "
                             "endpoint dropped or repeated inputs; lower EMBEDDINGS_BATCH to "
                             "its limit")
        dims = {len(row) for row in rows}
        dim = dims.pop() if len(dims) == 1 else 0
        usage = reply.get("usage")
        with self.lock:
            if not dim or self.dim not in (None, dim):
                raise InputError(f"{self.where()}: embeddings of {dim or 'no or several'} "
                                 f"dimensions after {self.dim}: the endpoint must serve one "
                                 "model of one dimension (is another model behind it?)")
            self.dim = dim
            if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
                self.tokens += usage["prompt_tokens"]
        try:
            values = np.asarray(rows, dtype=np.float64)
        except OverflowError:  # an integer beyond any float
            values = np.full(1, np.inf)
        if not (np.abs(values) <= FLOAT32_MAX).all():  # NaN compares False
            raise InputError(f"{self.where()}: its reply's embeddings hold NaN, infinite or "
                             "values beyond float32's range (3.4e38): check the model the "
                             "endpoint serves (nothing of this batch was stored)")
        out = np.empty((n, dim), dtype=np.float32)
        out[index] = values
        return out


def served_entry(entry: ModelEntry) -> ServedModel:
    """`entry` if it is a served model with its endpoint, else one line saying what to give
    (its kind's URL variable: models.SERVED_URLS)."""
    if not isinstance(entry, ServedModel):
        raise InputError(f"MODEL {entry.name} is a {entry.kind} model, not a served one "
                         "(api:<model>)")
    if not entry.endpoint:
        variable, example = SERVED_URLS[entry.kind]
        raise InputError(f"MODEL {entry.name} is served: give {variable}, its endpoint's URL "
                         f"(e.g. {example})")
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
        self.obj = EmbeddingsClient(entry, api_key())
        self.device = Remote()
        self.compute_dtype = "the endpoint's"
        self.max_length = None  # the endpoint truncates as it is configured to
        self.task_metadata = None  # no MTEB task: the client is called with the texts
        size = entry.batch_size  # this run's fingerprint (dimension, vectors): the probes
        self.probes = np.concatenate([self._vectors(list(PROBES[lo:lo + size]))
                                      for lo in range(0, len(PROBES), size)])
        self.dim = self.probes.shape[1]
        self.fingerprint = np.round(self.probes.astype(np.float64), DIGITS).tolist()

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        """Nothing beyond the entry (its endpoint and model name); a store is never checked
        against an entry without an endpoint (whose settings would differ from any store's)."""
        served_entry(entry)
        return {}

    @classmethod
    def identity_change(cls, config: dict, entry: ModelEntry) -> str | None:
        """What differs between the endpoint a store's `config` was embedded at and the one
        `entry` names now, in words (None when the same: core/http.endpoint_identity, the
        scheme and host in any case), known without a request."""
        was = (config.get("model") or {}).get("endpoint")
        now = served_entry(entry).endpoint
        if was is None or endpoint_identity(str(was)) == endpoint_identity(now):
            return None
        return f"embedded at {shown_url(str(was))}, not at {shown_url(now)}"

    def settings(self) -> dict:
        """What the store's config records once the endpoint answered: its fingerprint."""
        return {"fingerprint": self.fingerprint}

    def probe_change(self, config: dict) -> str | None:
        """What differs between the endpoint that embedded a store (its `config`: dimension,
        fingerprint) and the one answering now, in words; None when its probes' vectors are
        the recorded ones within MIN_COSINE, and the recorded fingerprint is then this run's
        (a store's config stays as it was made)."""
        made = np.asarray(config.get("fingerprint") or [], dtype=np.float64)
        if config.get("dim") != self.dim:
            return f"embeddings of {self.dim} dimensions, the store's are {config.get('dim')}"
        if made.shape != self.probes.shape:
            return ("the store records no fingerprint of the probe texts (made before they "
                    "were recorded)")
        now = self.probes.astype(np.float64)
        cosines = (made * now).sum(axis=1) / np.maximum(
            np.linalg.norm(made, axis=1) * np.linalg.norm(now, axis=1), 1e-30)
        if cosines.min() >= MIN_COSINE:
            self.fingerprint = config["fingerprint"]
            return None
        worst = int(np.argmin(cosines))
        return (f"the probe texts' vectors differ from the store's (cosine "
                f"{cosines[worst]:.4f} at the lowest, probe {worst + 1} of {len(PROBES)}; "
                f"the same model gives at least {MIN_COSINE})")

    def encode_ids(self, texts: list[str], token_budget: int | None = None,
                   max_batch: int | None = None, progress: bool | Progress = True,
                   query: bool = False) -> tuple[np.ndarray, int]:
        """Vectors of `texts` in their order, `batch_size` texts per request, `concurrency`
        requests at once, and the tokens the endpoint counted (usage.prompt_tokens). Query
        texts (`query`) are sent as they are: their QUERY_PROMPT is already before them
        (ObjectEncoder.format), the protocol has no prompt of its own."""
        entry: ServedModel = self.entry  # type: ignore[assignment]
        size, before = entry.batch_size, self.obj.tokens
        bar = progress if isinstance(progress, Progress) else Progress(
            len(texts), "embed", "papers", show=progress)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), size)
        # in order: a failed batch raises here (its part never written; the batches not yet
        # sent are never sent), and a Ctrl-C leaves the requests in flight behind
        batches = each_at_once(lambda lo: self._vectors(texts[lo:lo + size]), starts,
                               entry.concurrency)
        with contextlib.closing(batches):
            for lo, vectors in zip(starts, batches, strict=True):
                out[lo:lo + size] = vectors
                bar.update(len(vectors))
        if bar is not progress:
            bar.close()
        return out, self.obj.tokens - before
