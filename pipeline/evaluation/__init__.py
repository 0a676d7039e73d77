"""Scoring runs: the metric kernels (trec_eval's definitions), per-run evaluation, the results
table gathered over every corpus, and significance tests."""
