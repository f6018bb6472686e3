"""The cuVS arm: shim build against the wheels' headers (CPU), and fits against the float64 oracle (GPU).

The build test needs the cuVS wheels (libcuvs-cu13 26.10 and friends, README "cuVS") on
sys.path and g++; the load-chain test also needs torch's CUDA library wheels (cuBLAS,
cuSOLVER, ..., nvJitLink 13.0). CI has none of them, so both skip there with the reason. The GPU test
runs the arm in a fresh process, once with ``arms.cuvs.preload()`` before torch is
imported and once after (as the worker does today), and compares with
``turbo_gmm.diag.reference.em``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from arms import cuvs
from turbo_gmm.diag import reference

REPO = Path(__file__).resolve().parents[2]
N_ITER = 10
REG_COVAR = 1e-6
# (N, components the data are drawn from, components fitted, d): EM still moving at the end
SHAPES = [(1023, 2, 7, 5), (1023, 1, 3, 33)]
LL_RTOL = 1e-4
WEIGHTS_ATOL, MEANS_ATOL, VARIANCES_RTOL = 1e-4, 1e-3, 1e-3


def test_pick_nvjitlink_takes_newest_at_least_13_3():
    path, reason = cuvs.pick_nvjitlink([("13.0.88", "/torch/lib"), ("13.5.37", "/new/lib"), ("13.3.1", "/mid/lib")])
    assert path == Path("/new/lib") and reason == ""


def test_pick_nvjitlink_rejects_torchs_13_0_with_reason():
    path, reason = cuvs.pick_nvjitlink([("13.0.88", "/torch/lib")])
    assert path is None
    assert "13.0.88" in reason and ">= 13.3" in reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the reason given without a GPU")
def test_available_names_missing_cuda():
    assert "CUDA" in cuvs.available()


def _require_build_tools():
    try:
        cuvs.build_command(Path("probe.so"))
    except RuntimeError as e:  # wheels, CUDA headers or libcudart missing
        pytest.skip(str(e))
    if shutil.which(os.environ.get("CXX", "g++")) is None or shutil.which("nm") is None:
        pytest.skip("g++ and nm are needed to build and inspect the shim")


def test_shim_builds_against_wheel_headers_and_is_cached(tmp_path, monkeypatch):
    _require_build_tools()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    built = cuvs.build_shim()  # g++ ... -Wl,--no-undefined: cuvs::cluster::gmm::fit resolved in libcuvs.so
    assert built.parent == tmp_path / "cache" / "turbo-gmm"
    exported = subprocess.run(["nm", "-D", "--defined-only", str(built)], capture_output=True, text=True,
                              check=True).stdout
    for name in ("turbo_cuvs_session_create", "turbo_cuvs_session_destroy", "turbo_cuvs_gmm_fit"):
        assert f" T {name}" in exported
    stamp = built.stat().st_mtime_ns
    assert cuvs.build_shim() == built and built.stat().st_mtime_ns == stamp  # cached, not rebuilt

    edited = tmp_path / "cuvs_shim.cpp"
    edited.write_text(cuvs.SHIM_SOURCE.read_text() + "\n// edited\n")
    monkeypatch.setattr(cuvs, "SHIM_SOURCE", edited)
    assert cuvs.shim_path() != built  # a changed source gets a new cache entry


LOAD_CHAIN_SCRIPT = r"""
import ctypes, json, sys
import arms.cuvs as cuvs
if sys.argv[1] == "old_first":  # what torch 2.11 does at import: nvJitLink 13.0, RTLD_GLOBAL
    old = min(cuvs._nvjitlink_candidates(), key=lambda c: cuvs._version_tuple(c[0]))
    ctypes.CDLL(old[1], mode=ctypes.RTLD_GLOBAL)
shim = cuvs._load_shim()
s = cuvs._Session(shim)
out = [ctypes.c_float(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int64()]
rc = shim.turbo_cuvs_gmm_fit(s.ptr, None, 0, 0, 0, 0, 0, 0, 0, 10, 2, 2, 3, 1e-6, 0.0,
                             *map(ctypes.byref, out), s.err, len(s.err))
print(json.dumps({"rc": rc, "err": s.err.value.decode()}))
"""


def _on_sys_path(relative: str) -> bool:
    return any((Path(e) / relative).is_file() for e in sys.path if e)


@pytest.mark.skipif(torch.cuda.is_available(), reason="calls fit on null pointers: only safe without a GPU")
@pytest.mark.parametrize("order", ["new_only", "old_first"])
def test_libcuvs_loads_and_reports_cuda_errors_without_gpu(order):
    """The load chain resolves libcuvs's __nvJitLink*_13_3 even after nvJitLink 13.0 is loaded;
    a C++ exception inside fit comes back as rc 1 with its message."""
    _require_build_tools()
    if not _on_sys_path("nvidia/cu13/lib/libcublas.so.13"):
        pytest.skip("torch's CUDA library wheels (nvidia-cublas, ...) are not on sys.path")
    versions = [v for v, _ in cuvs._nvjitlink_candidates()]
    if order == "old_first" and not any(cuvs._version_tuple(v) < cuvs.NVJITLINK_MIN for v in versions):
        pytest.skip(f"no nvJitLink < 13.3 installed to load first (found {versions})")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", LOAD_CHAIN_SCRIPT, order], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rc"] == 1 and "CUDA" in result["err"], result


GPU_SCRIPT = r"""
import json, sys
spec = json.loads(sys.argv[1])
if spec["order"] == "torch_first":  # torch's nvJitLink 13.0 is loaded before cuVS's 13.5
    import torch
import arms.cuvs as cuvs
reason = cuvs.preload()
import numpy as np, torch
from turbo_gmm.datasets import make_dataset, shared_init
assert reason is None and cuvs.available() is None, (reason, cuvs.available())
for i, (N, Kg, K, d) in enumerate(spec["shapes"]):
    X = make_dataset(N, Kg, d, seed=0, device="cuda").X
    init = shared_init(X, K, seed=0)
    run = cuvs.prepare(X, init, spec["n_iter"], {"reg_covar": spec["reg_covar"], "overhead_reps": 1})
    run()
    fit = run()
    info = dict(fit.info, n_iter=fit.n_iter, peak_bytes=cuvs.peak_bytes())
    np.savez(f"{spec['out']}/{i}.npz", X=X.cpu().numpy(), w0=init.weights, m0=init.means, v0=init.variances,
             w=fit.weights.cpu().numpy(), m=fit.means.cpu().numpy(), v=fit.variances.cpu().numpy(),
             info=json.dumps(info))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("order", ["preload_first", "torch_first"])
def test_cuvs_fit_matches_float64_reference(tmp_path, order):
    """Both load orders: nvJitLink >= 13.3 RTLD_GLOBAL serves libcuvs even after torch loaded 13.0."""
    _require_build_tools()
    spec = {"shapes": SHAPES, "n_iter": N_ITER, "reg_covar": REG_COVAR, "out": str(tmp_path), "order": order}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", GPU_SCRIPT, json.dumps(spec)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for i, (N, _, K, d) in enumerate(SHAPES):
        r = np.load(tmp_path / f"{i}.npz")
        info = json.loads(str(r["info"]))
        (w_ref, m_ref, v_ref), lls = reference.em(r["X"], r["w0"], r["m0"], r["v0"], N_ITER, REG_COVAR)
        ll = reference.mean_log_likelihood(r["X"], r["w"], r["m"], r["v"])
        ll_ref = reference.mean_log_likelihood(r["X"], w_ref, m_ref, v_ref)
        assert info["n_iter"] == N_ITER
        assert abs(ll - ll_ref) <= LL_RTOL * abs(ll_ref), (ll, ll_ref)
        assert abs(r["w"].astype(np.float64).sum() - 1.0) < 1e-5
        assert np.abs(r["w"] - w_ref).max() < WEIGHTS_ATOL
        assert np.abs(r["m"] - m_ref).max() < MEANS_ATOL
        assert np.abs(r["v"] / v_ref - 1).max() < VARIANCES_RTOL
        # cuVS's lower bound is the mean log-likelihood of its last in-loop E-step
        assert abs(info["lower_bound"] - lls[-1] / N) <= LL_RTOL * abs(lls[-1] / N)
        assert info["rmm_peak_bytes"] > 0 and info["peak_bytes"] == info["held_bytes"] + info["rmm_peak_bytes"]
        assert info["held_bytes"] >= r["X"].nbytes + 4 * N  # X and the int32 labels at least
        assert info["em_iter_ms"] > 0


def test_wheels_installed_with_target_are_found_in_that_folder(tmp_path, monkeypatch):
    """make install-offline puts the cuVS wheels in a --target folder outside torch's environment;
    the arm puts it on sys.path ($TURBO_GMM_CUVS_SITE) and finds the packages and nvJitLink there."""
    for pkg in cuvs.WHEEL_PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvJitLink.so.13").write_bytes(b"")
    info = tmp_path / "nvidia_nvjitlink-13.5.37.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nvjitlink\nVersion: 13.5.37\n")
    (info / "RECORD").write_text("nvidia/cu13/lib/libnvJitLink.so.13,,\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(cuvs.SITE_ENV, str(tmp_path))
    cuvs.use_wheel_site()
    assert str(tmp_path) in sys.path
    assert all(cuvs._package_dir(pkg) == tmp_path / pkg for pkg in cuvs.WHEEL_PACKAGES)
    assert ("13.5.37", str(lib / "libnvJitLink.so.13")) in cuvs._nvjitlink_candidates()
