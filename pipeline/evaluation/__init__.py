"""Scoring runs: per-run evaluation with the metric kernels of pipeline.metrics (trec_eval's
definitions), the results table gathered over every corpus, and significance tests."""
