"""BM25, as pyserini runs it: the retriever (retriever.py), k1 and b tuned on validation pools
(tuning.py), the arrays engine (arrays.py: Lucene's analysis and scores in numba, the default),
the analysed-text store it reads (store.py), Lucene itself through Anserini (lucene.py), and the
JVM that both engines start, isolated in jvm.py."""
