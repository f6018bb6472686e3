"""Studies and benchmarks of the kernels and the estimator (GPU entry points: ``python -m harness.studies.<name>``)."""
