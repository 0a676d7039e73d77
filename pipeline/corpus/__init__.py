"""The corpus: its data files (files.py), its manifest and kind (manifest.py), and the
installing of a corpus written whole (install.py). Ingest, imports and MDCR-style benchmarks
write corpora; pools, encoding and retrieval read them through here."""
