"""Run by PyLate's own environment (tests/conftest.py install_pylate), never imported by the
pipeline: `python pylate_reference.py build <bert> <out> <query_length> <document_length>`
saves a tiny ColBERT folder as PyLate saves it (tiny BERT, [Q]/[D] markers added, PyLate's
Dense projection to 16 dimensions, seeded); `python pylate_reference.py encode <folder>
<texts.json> <out.npz>` writes PyLate's own token vectors of the texts as queries and as
documents, every query's MaxSim score with every document (pylate.scores.colbert_scores), and
PyLate's rerank order of each query's documents (pylate.rank.rerank)."""

from __future__ import annotations

import json
import sys

import numpy as np
import torch


def build(bert: str, out: str, query_length: int, document_length: int) -> None:
    from pylate import models

    torch.manual_seed(3)
    model = models.ColBERT(model_name_or_path=bert, embedding_size=16, device="cpu",
                           query_length=query_length, document_length=document_length)
    model.save(out)


def encode(folder: str, texts_file: str, out: str) -> None:
    from pylate import models, rank, scores

    with open(texts_file, encoding="utf-8") as handle:
        texts = json.load(handle)
    model = models.ColBERT(model_name_or_path=folder, device="cpu")
    queries = model.encode(texts, is_query=True, batch_size=3)
    docs = model.encode(texts, is_query=False, batch_size=3)
    matrix = scores.colbert_scores(
        torch.nn.utils.rnn.pad_sequence([torch.from_numpy(q) for q in queries], True),
        torch.nn.utils.rnn.pad_sequence([torch.from_numpy(d) for d in docs], True),
        documents_mask=torch.nn.utils.rnn.pad_sequence(
            [torch.ones(len(d)) for d in docs], True))
    ids = [[str(j) for j in range(len(texts))] for _ in texts]
    ranked = rank.rerank(documents_ids=ids, queries_embeddings=queries,
                         documents_embeddings=[docs for _ in texts])
    np.savez(out, scores=matrix.numpy(), lengths=[len(d) for d in docs],
             docs=np.concatenate(docs), queries=np.stack(queries),
             rerank=np.array([[int(r["id"]) for r in row] for row in ranked]),
             rerank_scores=np.array([[r["score"] for r in row] for row in ranked]))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "build":
        build(args[0], args[1], int(args[2]), int(args[3]))
    else:
        encode(*args)
