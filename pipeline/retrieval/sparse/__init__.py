"""Learned sparse retrieval (SPLADE): an inverted index of a pool's stored sparse vectors,
searched on arrays (impact.py) or by Lucene's impact search (lucene.py)."""
