"""The data-parallel EM benchmark: two gloo ranks started by torchrun on the CPU give the
single-process fit on the same data (make_dataset, shared_init), so the library's
fit_sharded and the benchmark's sharded data are both right."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from harness.tests.conftest import REPO
from turbo_gmm import fit
from turbo_gmm.diag import reference as ref
from turbo_gmm.datasets import make_dataset, shared_init

N, K, D, SEED, N_ITER = 1023, 3, 33, 2, 4


def _torchrun(tmp_path, nproc, interpret, *extra):
    out = tmp_path / f"fit{nproc}.npz"
    env = dict(os.environ, TRITON_INTERPRET="1" if interpret else "0", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "harness.studies.distributed_bench", "--N", str(N), "--K", str(K), "--dim", str(D),
           "--seed", str(SEED), "--n-iter", str(N_ITER), "--backend", "gloo", "--warmup", "0", "--out", str(out), *extra]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("{")))
    return dict(np.load(out)), report


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter test: CPU only (the NCCL test covers the GPU)")
def test_two_gloo_ranks_give_the_single_process_kernel_fit(tmp_path):
    """Kernels in the Triton interpreter on both ranks vs turbo_gmm.fit on the whole X.
    Each kernel program sums its rows in float32 before the float64 commit, so other
    row partitions round differently: agreement to ~1e-6 of each parameter's scale
    (measured 2e-6 at worst after 4 iterations), tested at 1e-5. The float64 path
    below agrees to 1e-10."""
    got, report = _torchrun(tmp_path, 2, interpret=True)
    assert report["world_size"] == 2 and len(report["ms_per_iter"]) == N_ITER and not report["streamed"]
    X = make_dataset(N, K, D, SEED).X
    init = shared_init(X, K, SEED)
    one = fit(X, (init.weights, init.means, init.variances), N_ITER)
    for name, want in (("weights", one.weights), ("means", one.means), ("variances", one.variances),
                       ("log_likelihoods", one.log_likelihoods)):
        want = want.cpu().numpy()
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=name)


def test_two_streaming_gloo_ranks_give_the_float64_em(tmp_path):
    """The torch fallback (no interpreter), each rank's host shard streamed in chunks,
    against the float64 oracle on the whole X."""
    got, report = _torchrun(tmp_path, 2, False, "--max-device-bytes", str(100 * 16 * (D + 2 * K)))
    assert report["streamed"] and report["algorithm"] == "torch_float64"
    X = make_dataset(N, K, D, SEED).X
    init = shared_init(X, K, SEED)
    (w, m, v), lls = ref.em(X.double().numpy(), init.weights, init.means, init.variances, N_ITER)
    for name, want in (("weights", w), ("means", m), ("variances", v), ("log_likelihoods", lls)):
        np.testing.assert_allclose(got[name], want, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs for two NCCL ranks")
def test_two_nccl_ranks_give_the_single_gpu_fit(tmp_path):
    out = tmp_path / "nccl.npz"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "harness.studies.distributed_bench", "--N", "1000003", "--K", "16", "--dim", "32", "--n-iter", "5", "--out", str(out)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    X = make_dataset(1_000_003, 16, 32, 0, "cuda").X
    init = shared_init(X, 16, 0)
    one = fit(X, (init.weights, init.means, init.variances), 5)
    got = np.load(out)
    np.testing.assert_allclose(got["means"], one.means.cpu().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["variances"], one.variances.cpu().numpy(), rtol=1e-5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter test: CPU only (the NCCL test covers the GPU)")
def test_two_gloo_ranks_at_fp64_give_the_single_process_fp64_fit(tmp_path):
    """precision fp64 (issue 20): float64 sums on each rank, so another row partition rounds only in float64;
    the sharded fit equals the single-process fp64 fit to 1e-12."""
    got, report = _torchrun(tmp_path, 2, True, "--precision", "fp64")
    assert report["precision"] == "fp64"
    X = make_dataset(N, K, D, SEED).X
    init = shared_init(X, K, SEED)
    one = fit(X, (init.weights, init.means, init.variances), N_ITER, precision="fp64")
    for name, want in (("weights", one.weights), ("means", one.means), ("variances", one.variances),
                       ("log_likelihoods", one.log_likelihoods)):
        want = want.cpu().numpy()
        np.testing.assert_allclose(got[name], want, rtol=1e-12, atol=1e-12 * np.abs(want).max(), err_msg=name)
