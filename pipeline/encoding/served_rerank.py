"""Served rerankers: a first stage's pairs scored by a `/rerank` endpoint,
`MODEL=rerank-api:<model>` with RERANK_URL (docs/retrieval.md, "Served rerankers").

The protocol is Cohere's rerank request, {model, query, documents, return_documents: false},
which Jina's API, infinity-emb, vLLM and Xinference take; the documents go under `texts` too,
text-embeddings-inference's name for them (each server reads the field it knows). The reply is
either Cohere's `results[]` of {index, relevance_score} or TEI's list of {index, score}. Each
request is one query paper and up to EMBEDDINGS_BATCH of its candidates, EMBEDDINGS_CONCURRENCY
requests at once, all through the one client (core/http.bounded_request: retries after 429,
5xx or a dropped connection, within the batch's DEADLINE; the key, OPENAI_API_KEY, sent only
in the Authorization header and never shown). A reply that is not one score for each of the
request's documents (an index missing or twice, a value that is not a finite number) is
refused in one line: nothing of the reranked run is written.

A reranked run records the endpoint and the served model's name as its reranker's identity
(encoding/identity.model_identity), so another endpoint or name makes it stale, and the
scores of PROBE's pairs, sent before the first stage's, as the endpoint's fingerprint: a
record of what answered, which nothing compares (another model served under the same URL and
name is not noticed; docs/retrieval.md says so).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from pipeline.core.errors import InputError
from pipeline.core.http import (
    Bounds,
    Endpoint,
    Words,
    each_at_once,
)
from pipeline.core.logs import Progress
from pipeline.encoding.encoders import join_text
from pipeline.encoding.served import (
    BACKOFF,
    CONNECT,
    DEADLINE,
    DIGITS,
    ITEM_BYTES,
    MAX_WAIT,
    NOTICE,
    PROBES,
    READ,
    REPLY_SLACK,
    RETRIES,
    served_entry,
)
from pipeline.models import API_BATCH, KEY_HINTS, RERANK_URL, ModelEntry, api_key

log = logging.getLogger(__name__)

# The fingerprint's pairs: the first probe text as the query, every probe as a document
PROBE = (PROBES[0], list(PROBES))
HINTS = {**KEY_HINTS,
         404: f"give {RERANK_URL} the whole URL (the server's path: /rerank, /v1/rerank or "
              "/v2/rerank) and the model's name as the endpoint serves it",
         413: f"lower {API_BATCH} (documents per request) to the endpoint's limit",
         422: f"give {RERANK_URL} an endpoint that speaks the /rerank protocol (docs/"
              "retrieval.md, Served rerankers)"}
HINT = f"check the model's name and the endpoint's limits ({API_BATCH}: documents per request)"
pause = time.sleep  # how a retry waits (the tests count the waits instead)
clock = time.monotonic  # how the deadline is kept


class ServedScorer(Endpoint):
    """A reranker served at RERANK_URL: `score` gives each pair's score, as the endpoint
    gives it, one request per query paper and EMBEDDINGS_BATCH of its candidates."""

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None) -> None:
        self.entry = served_entry(entry)
        if model_path is not None or device is not None:
            raise InputError(f"MODEL {entry.name} is served by {self.entry.endpoint}: it has "
                             "no MODEL_PATH or device here; leave them out")
        super().__init__(self.entry.endpoint, api_key(), self.entry.concurrency)
        self.lock = threading.Lock()
        self.requests = 0
        self.fingerprint = np.round(self._scores(*PROBE), DIGITS).tolist()
        log.info(f"[rerank] MODEL {entry.name}: served at {self.entry.endpoint} "
                 f"({self.entry.batch_size} documents per request, "
                 f"{self.entry.concurrency} at once)")

    def where(self) -> str:
        return f"MODEL {self.entry.name} at {self.entry.endpoint}"

    def text(self, title: str | None, abstract: str | None) -> str:
        return join_text(title, abstract, "", "space")

    def score(self, queries: dict[int, str], docs: dict[int, str],
              pairs: list[tuple[int, int]]) -> np.ndarray:
        """The endpoint's score of each (query id, doc id) pair, in `pairs`' order: each
        query's pairs in requests of EMBEDDINGS_BATCH documents, EMBEDDINGS_CONCURRENCY at
        once. A failed request raises here, the requests not yet sent never sent."""
        places: dict[int, list[int]] = defaultdict(list)
        for place, (query, _) in enumerate(pairs):
            places[query].append(place)
        size = self.entry.batch_size
        batches = [(query, where[lo:lo + size]) for query, where in places.items()
                   for lo in range(0, len(where), size)]
        out = np.zeros(len(pairs), dtype=np.float64)
        answers = each_at_once(lambda batch: self._scores(
            queries[batch[0]], [docs[pairs[place][1]] for place in batch[1]]),
            batches, self.entry.concurrency)
        with contextlib.closing(answers), \
                Progress(len(pairs), f"[rerank] {self.entry.name}", "pairs") as progress:
            for (_, where), scores in zip(batches, answers, strict=True):
                out[where] = scores
                progress.update(len(where))
        return out

    def details(self) -> dict:
        """What the reranked run records of the endpoint beyond its identity."""
        return {"reranker_fingerprint": self.fingerprint, "reranker_requests": self.requests}

    def _scores(self, query: str, documents: list[str]) -> np.ndarray:
        """The endpoint's score of each of `documents` for `query` (one request, retried)."""
        n = len(documents)
        body = json.dumps({"model": self.entry.hf_id, "query": query, "documents": documents,
                           "texts": documents, "return_documents": False}).encode()
        bounds = Bounds(RETRIES, BACKOFF, MAX_WAIT, CONNECT, READ, DEADLINE, NOTICE, pause,
                        clock)
        words = Words("rerank", self.where(), RERANK_URL, "request",
                      f"the reply to a request of {n} documents",
                      "rerank again (nothing of the run was written)", HINTS, HINT)
        # a score per document, or each document echoed back where a server ignores
        # return_documents: at most ITEM_BYTES and 6 bytes a character each (JSON's \\uXXXX)
        bound = REPLY_SLACK + sum(ITEM_BYTES + 6 * len(text) for text in documents)
        data = self.post(body, bounds, words, bound)
        with self.lock:
            self.requests += 1
        if data is None:
            raise InputError(f"{self.where()}: its reply to {n} documents is larger than "
                             f"{bound:,} bytes, more than their scores can be: give "
                             f"{RERANK_URL} an endpoint that speaks the /rerank protocol")
        reply = self.json_reply(data, lambda reply: isinstance(reply, list) or (
            isinstance(reply, dict) and isinstance(reply.get("results"), list)),
            f"{self.where()}: its reply is not a reranking (JSON results[] or a list)",
            f"give {RERANK_URL} the URL of a /rerank endpoint (docs/retrieval.md)")
        return self._parsed(reply.get("results") if isinstance(reply, dict) else reply, n)

    def _parsed(self, items: list, n: int) -> np.ndarray:
        """Each document's score placed by its `index`: each of 0..n-1 exactly once, every
        score (Cohere's relevance_score, TEI's score) a finite JSON number."""
        def number(item: object) -> float | None:
            if not isinstance(item, dict):
                return None
            value = item.get("relevance_score", item.get("score"))
            if type(value) not in (int, float) or type(item.get("index")) is not int:
                return None  # true is no number, nor "0.5"
            try:
                return float(value) if math.isfinite(value) else None
            except OverflowError:  # an integer beyond any float
                return None

        values = [number(item) for item in items]
        if None in values:
            raise InputError(f"{self.where()}: its reply's items are not {{index, "
                             "relevance_score or score as a finite number}: give "
                             f"{RERANK_URL} an endpoint that speaks the /rerank protocol")
        index = [item["index"] for item in items]
        if sorted(index) != list(range(n)):
            raise InputError(f"{self.where()}: {len(items)} scores (indices "
                             f"{sorted(set(index))[:5]}...) came back for {n} documents: the "
                             f"endpoint dropped or repeated documents; lower {API_BATCH} to "
                             "its limit")
        out = np.empty(n, dtype=np.float64)
        out[index] = values
        return out
