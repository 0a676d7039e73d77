"""Encoders and what they write: the model registry, the transformer encoders (one vector per
paper, or per sentence for multi-vector models), the embed stage and the embedding store."""
