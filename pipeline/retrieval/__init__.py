"""Retrieval: the dispatcher (search.py), the retriever registry (registry.py, base.py), the
retrievers (bm25/, dense/, fusion.py, random.py) and the run store (runs.py)."""
