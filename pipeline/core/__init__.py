"""The bottom layer: errors, atomic writes and manifests with checksums (artifacts), the one
staleness rule (inputs), worker processes, stage timing and logging."""
