"""Hydra sweeper plugin ``hydra/sweeper=longest_first`` (see longest_first_sweeper.py)."""
