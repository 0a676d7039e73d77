"""Encoders as retrievers: the retriever over a model's embedding store (retriever.py: one
vector per paper, or one per sentence for multi-vector models) and exact search (exact.py:
Faiss or torch, on the GPU where one works)."""
