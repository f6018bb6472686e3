"""Studies of the kernels that need a GPU: benchmarks, accuracy sweeps (harness/, not the library)."""
