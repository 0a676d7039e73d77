"""Retrieval: the retriever registry (BM25, dense, multi-vector, fusion, random), the engines
(Lucene through Anserini, BM25 on arrays, exact dense search), BM25 tuning and the run store."""
