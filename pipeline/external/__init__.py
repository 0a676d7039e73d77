"""Outside test collections imported as corpora with one pool (BEIR's layout)."""
