"""Large-scale evaluation pipeline for scientific document encoders (MDCR-style)."""
