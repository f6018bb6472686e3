"""Test-session set-up shared by every test folder.

Without a GPU the Triton kernels run in Triton's CPU interpreter; the switch is
read when a kernel is decorated, so it must be set before `kernels` is imported.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped on CPU-only machines)")
