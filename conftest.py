"""Test-session set-up shared by every test folder.

Without a GPU the Triton kernels run in Triton's CPU interpreter; the switch is
read when a kernel is decorated, so it must be set before `turbo_gmm` is imported.
JAX (the device-array tests) takes 75% of a GPU's memory at its first array unless
told not to: on the H200 on 2026-12-01 that was 106 GiB held by one test process,
and the CUDA out-of-memory errors of every other process sharing the GPU.
"""
import os

import torch

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before any test imports JAX
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped on CPU-only machines)")
