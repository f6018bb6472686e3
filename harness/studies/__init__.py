"""Studies and benchmarks of the kernels: they measure the library, so they stand above it.

Each is a command-line entry point, ``python -m harness.studies.<name>``:

- ``measure``: kernel-only and whole-iteration times, bandwidth and resources per shape (GPU);
- ``exactness``: both algorithms at both precisions against 60-digit mpmath and float64 (§4);
- ``conditioning``: the lifted score's error as data leave the origin (Appendix C; NumPy);
- ``resources``: what the compiler makes of a launch configuration for sm_90 (no GPU needed);
- ``kernel_profile``: device time per kernel of an arm's EM iteration (GPU);
- ``ws_pass2``: the Triton pass 2 against the warp-specialized one (Hopper);
- ``statistics_accumulation``: the statistics kernels as dispatched: per-component error, ms/iter, and the
  Triton against the warp-specialized one pass by N (GPU);
- ``streaming_bench``: host-to-device bandwidth, streamed and in-memory ms/iteration (GPU);
- ``distributed_bench``: data-parallel EM on the seeded data, under ``torchrun`` (GPUs or gloo);
- ``estimator_e2e``: ``GaussianMixture.fit`` end to end from a host array and a CUDA tensor, with its time split (GPU);
- ``validation_phase``: the validation + centering pass bare, beside the harness's NVML sampler and JAX, and
  the estimator's own phase (GPU);
- ``kmeans_init_bench``: the device k-means++ / Lloyd initialization against flash-kmeans and cuVS (GPU);
- ``full_bench``: full and tied covariance, both dataflows and both algorithms, beside diag (GPU).

The benchmark numbers of record come from the harness (``python -m harness``); these are
the diagnostics and case studies behind the kernels' design.
"""
