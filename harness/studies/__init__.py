"""Focused GPU studies, each a `python -m harness.studies.NAME --out DIR` entry point that writes its rows as it goes."""
