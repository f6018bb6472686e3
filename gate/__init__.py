"""Float64 validity gate: every returned fit is re-scored on the same X before it may enter a table."""
