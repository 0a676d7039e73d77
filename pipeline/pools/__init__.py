"""Query sets and candidate pools (MDCR §3 and §4), and perturbed query texts."""
