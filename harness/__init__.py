"""Hydra entry point, seeded data, subprocess cells, timing, memory and results."""
