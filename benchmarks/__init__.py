"""Benchmarks that write their figures into benchmarks/results (docs/benchmarks.md)."""
