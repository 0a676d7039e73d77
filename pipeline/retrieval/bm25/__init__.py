"""BM25, as pyserini runs it: the retriever (retriever.py), k1 and b tuned on validation pools
(tuning.py), the engines by BM25_ENGINE (engines.py): the arrays engine (arrays.py: Lucene's
scores in numba, the default) over the analysed-text store it reads (store.py), and Lucene
itself through Anserini (lucene.py); the text and analysis both share (analysis.py), and the
JVM that analysis and Lucene start, isolated in jvm.py."""
