"""MDCR-style benchmarks (MDCR §4): per query, a short candidate list of cited papers and typed
hard negatives, ranked whole.

- `benchmark`: a benchmark held as a corpus of the pipeline (one pool per field), so embed,
  index, search and eval run on it unchanged;
- `build`: make one from a corpus's field-level pools and runs (`make mdcr`), and the Jaccard
  index between models' negatives that picks the model-based types (`make mdcr-jaccard`);
- `official`: the official release's layout (export, import), its scores file and its
  evaluator's numbers.
"""
