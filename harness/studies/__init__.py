"""Measurement entry points (``python -m harness.studies.<name>``): studies of the kernels that are not
benchmark cells, each writing its CSVs where the command line says."""
