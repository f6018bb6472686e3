"""Tables and figures of the paper, rendered from results CSVs alone (no GPU)."""
