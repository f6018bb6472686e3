"""Flash-GMM arms: the load-time rewrite, the M-step algebra, and (GPU) their kernel's numbers.

Their file is never in this repository. The rewrite tests read it from the git
repository named by ``FLASH_GMM_REPO`` (``git show <pinned commit>:...``, so a bare
mirror works in CI) or from the ``make baselines`` checkout, and skip otherwise.
"""
from __future__ import annotations

import os
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import arms.flash_gmm as fg
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.diag import reference as ref

NO_SOURCE = "no Flash-GMM checkout: run make baselines"


def their_source(kernel_file: str = fg.KERNEL_FILE) -> str:
    """Their pinned file (the diagonal kernel, or ``fg.FULL_KERNEL_FILE``): from FLASH_GMM_REPO's git, else the
    clone `make baselines` made; the test skips without either."""
    repo = os.environ.get("FLASH_GMM_REPO")
    if repo:
        out = subprocess.run(["git", "-C", repo, "show", f"{fg.PINNED_COMMIT}:{kernel_file}"], capture_output=True,
                             text=True)
        assert out.returncode == 0, f"FLASH_GMM_REPO={repo}: git show failed: {out.stderr}"
        return out.stdout
    path = fg.REPO_ROOT / fg.DEFAULT_SRC / kernel_file
    if path.is_file():
        return path.read_text()
    pytest.skip(NO_SOURCE)


# ---------------------------------------------------------------- the rewrite


def test_every_edit_matches_their_pinned_file_once():
    text = their_source()
    for e in fg.TF32X3_EDITS:
        assert text.count(e.anchor) == 1, e.name
    new = fg.rewrite(text)
    compile(new, fg.KERNEL_FILE, "exec")
    assert "bfloat16" not in new.split("def flash_gmm_estep_diag")[0].split("import triton.language as tl")[1]
    assert new.count('input_precision="tf32x3"') == 6  # every tl.dot of both passes
    assert "(n_off < N) & (n_off < n_end)" in new


def test_a_mutated_file_names_the_edit_that_no_longer_matches():
    text = their_source()
    victim = next(e for e in fg.TF32X3_EDITS if e.name == "pass2-slab-end-mask")
    with pytest.raises(fg.RewriteMismatch, match=f"edit '{victim.name}' .* found its anchor 0 times"):
        fg.rewrite(text.replace(victim.anchor, victim.anchor.replace("n_off", "rows")), origin="their_file.py")


def test_rewrite_requires_each_anchor_exactly_once():
    """Runs without their file: a text made of the anchors themselves."""
    edits = fg.TF32X3_EDITS
    text = "\n#--\n".join(e.anchor for e in edits)
    new = fg.rewrite(text)
    assert all(e.replacement in new for e in edits)
    missing = "\n#--\n".join(e.anchor for e in edits[1:])
    with pytest.raises(fg.RewriteMismatch, match=f"edit '{edits[0].name}' .* found its anchor 0 times"):
        fg.rewrite(missing)
    doubled = text + "\n" + edits[-1].anchor
    with pytest.raises(fg.RewriteMismatch, match=f"edit '{edits[-1].name}' .* found its anchor 2 times"):
        fg.rewrite(doubled)


# ---------------------------------------------------------------- the M-step and the loop


def fake_estep(X, mu, log_var, log_pi):
    """Exact float64 statistics in Flash-GMM's output convention (sig_acc about the old means)."""
    x = X.numpy()
    w, m, v = np.exp(log_pi.numpy()), mu.numpy(), np.exp(log_var.numpy())
    n, s, u, _ = ref.estep(x, w, m, v)
    logZ = ref.logsumexp_rows(ref.log_prob(x, w, m, v))
    sig = u - 2.0 * m * s + m * m * n[:, None]
    return tuple(torch.from_numpy(a) for a in (logZ, n, s, sig))


def test_em_loop_with_exact_statistics_matches_float64_em():
    ds = make_dataset(1023, 7, 5, seed=0)
    X, init = ds.X.double(), shared_init(ds.X, 7, seed=0)
    start = [torch.from_numpy(a.astype(np.float64)) for a in (init.weights, init.means, init.variances)]
    got = fg.run_em(fake_estep, X, *start, n_iter=6, reg_covar=1e-6)
    (w, m, v), _ = ref.em(X.numpy(), init.weights, init.means, init.variances, n_iter=6, reg_covar=1e-6)
    for a, b in zip(got, (w, m, v)):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-10, atol=0)


def test_mstep_neither_renormalizes_nor_floors():
    """The gate must see what the kernel's statistics imply, however wrong."""
    Nk = np.array([60.0, 50.0])  # sums to 110 for N = 100: off the simplex, as a double count makes it
    mu_old = np.array([[0.0, 0.0], [1.0, 1.0]])
    mu_acc = np.array([[60.0, 6.0], [50.0, 100.0]])  # new means (1, 0.1) and (1, 2)
    sig_acc = np.array([[30.0, 1.2], [5.0, 60.0]])  # about the old means
    w, m, v = fg.diagonal_mstep(Nk, mu_acc, sig_acc, mu_old, N=100, reg_covar=1e-6)
    np.testing.assert_allclose(w, [0.6, 0.5])
    np.testing.assert_allclose(m, [[1.0, 0.1], [1.0, 2.0]])
    # E[(x - mu_old)^2] - (mu_new - mu_old)^2 + reg: (0.5 - 1, 0.02 - 0.01), (0.1 - 0, 1.2 - 1)
    np.testing.assert_allclose(v, [[-0.5 + 1e-6, 0.01 + 1e-6], [0.1 + 1e-6, 0.2 + 1e-6]], rtol=1e-12)


def test_slab_overlap_counts_the_rows_each_slab_walks_past_its_end():
    # N=20000, 16 slabs of 1250 walked in 64-row blocks: each covers 1280 rows,
    # the first 15 spill 30 rows into the next slab, the last one only past N.
    assert fg.slab_overlap_rows(20000, 16, 64) == 15 * 30
    assert fg.slab_overlap_rows(1024, 16, 64) == 0  # slabs of exactly one block
    # brute force: count how often each row is visited
    for N, S, B in ((1023, 16, 128), (20011, 16, 64), (5003, 32, 256), (77, 16, 64)):
        visits = np.zeros(N, int)
        chunk = -(-N // S)
        for s in range(S):
            for n0 in range(s * chunk, (s + 1) * chunk, B):
                rows = np.arange(n0, n0 + B)
                visits[rows[rows < N]] += 1
        assert visits.min() == 1 and fg.slab_overlap_rows(N, S, B) == visits.sum() - N


# ---------------------------------------------------------------- their kernel, interpreted (CPU)


def import_text(text: str, path: Path, name: str):
    path.write_text(text)
    return fg._import_file(path, name)


INTERPRETER_PASS2_BLOCK_N = 64


def one_config_per_pass(module):
    """The interpreter cannot benchmark configs, and any tiling must give the same numbers."""
    import triton

    module._diag_lse_kernel.configs = [triton.Config({"BLOCK_N": 32, "BLOCK_K": 16}, num_warps=4, num_stages=2)]
    pass2 = triton.Config({"BLOCK_N": INTERPRETER_PASS2_BLOCK_N, "BLOCK_K": 16}, num_warps=4, num_stages=2)
    module._diag_split_k_accum.configs = [pass2]


def float64_statistics(X, init):
    n, s, u, _ = ref.estep(X, init.weights, init.means, init.variances)
    m = init.means.astype(np.float64)
    logZ = ref.logsumexp_rows(ref.log_prob(X, init.weights, init.means, init.variances))
    return logZ, n, s, u - 2.0 * m * s + m * m * n[:, None]


def assert_statistics_match(got, want, rtol=1e-5):
    """Norm-wise relative error per statistic; tf32 (not x3) or bf16 operands miss by >= 1e-3."""
    logZ, *stats = (g.double().cpu().numpy() for g in got)
    for name, g, w in zip(("Nk", "mu_acc", "sig_acc"), stats, want[1:]):
        err = np.linalg.norm(g - w) / np.linalg.norm(w)
        assert err < rtol, f"{name}: relative error {err:.2e}"
    assert np.abs(logZ - want[0]).max() < rtol * np.abs(want[0]).max()


def test_rewritten_kernel_in_the_interpreter_matches_float64_and_the_slab_prediction(tmp_path):
    """Their dataflow with the fp32 edits, run by Triton's CPU interpreter.

    The interpreter computes fp32 dots exactly in fp32 (it ignores tf32x3), so this
    checks the rewrite's dataflow, not the tensor-core rounding (the GPU test does).
    A test-only edit drops their ``X.is_cuda`` assertion. Without the slab edit the
    weights overshoot the simplex by exactly the predicted overlap.
    """
    import triton

    if torch.cuda.is_available() or not triton.knobs.runtime.interpret:
        pytest.skip("interpreter test: CPU only (the GPU tests cover the compiled kernel)")
    cuda_assert = "assert X.is_cuda and mu.is_cuda"
    text = their_source()
    assert text.count(cuda_assert) == 1
    text = text.replace(cuda_assert, "pass  # test only: CPU interpreter")
    no_slab = tuple(e for e in fg.TF32X3_EDITS if e.name != "pass2-slab-end-mask")
    fixed = import_text(fg.rewrite(text), tmp_path / "fixed.py", "flash_gmm_test_interp_fixed")
    unfixed = import_text(fg.rewrite(text, no_slab), tmp_path / "unfixed.py", "flash_gmm_test_interp_unfixed")
    N, K, d = 5003, 7, 33
    X = make_dataset(N, K, d, seed=0).X
    init = shared_init(X, K, seed=0)
    args = tuple(torch.from_numpy(a) for a in (init.means, np.log(init.variances), np.log(init.weights)))
    args = (X, *args)
    want = float64_statistics(X.numpy(), init)
    overlap = fg.slab_overlap_rows(N, fixed._pick_n_split(N), INTERPRETER_PASS2_BLOCK_N)
    assert overlap > 0
    for module in (fixed, unfixed):
        one_config_per_pass(module)
    got = fixed.flash_gmm_estep_diag(*args)
    assert_statistics_match(got, want)
    assert abs(float(got[1].double().sum()) / N - 1.0) < 1e-6
    Nk = unfixed.flash_gmm_estep_diag(*args)[1]
    assert abs(float(Nk.double().sum()) / N - 1.0 - overlap / N) < 1e-6


# ---------------------------------------------------------------- shared memory at d = 128 (sm_90, offline)

SM90_SHARED_LIMIT = 232448  # bytes of shared memory one block may use on H100/H200 (227 KiB)

COMPILE_FOR_SM90 = r"""
import json, sys
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import arms.flash_gmm as fg

module = fg._import_file(Path(sys.argv[1]), "flash_gmm_sm90_probe")
out = []
for p, bn, bk, nw, ns in json.loads(sys.argv[2]):
    fn = getattr(module, fg.PASS_KERNELS[p]).fn
    sig = {a: "constexpr" if a in ("BLOCK_N", "BLOCK_K", "BLOCK_D", "K_EXACT")
           else "*fp32" if a.endswith("_ptr") else "i32" for a in fn.arg_names}
    src = ASTSource(fn, sig, constexprs=dict(BLOCK_N=bn, BLOCK_K=bk, BLOCK_D=128, K_EXACT=False))
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": nw, "num_stages": ns})
    out.append(k.metadata.shared)
print(json.dumps(out))
"""


def test_widened_configs_fit_sm90_shared_memory_at_d128_where_published_pass1_does_not(tmp_path):
    """Compiles the rewritten kernels for sm_90 with Triton's bundled ptxas (no GPU needed).

    Their smallest pass-1 config (every other one is larger in a block or in stages)
    must overflow, which is why the published list cannot launch at d = 128 in fp32;
    every pass-1 and pass-2 addition of the widened list must fit.
    """
    import json
    import sys

    path = tmp_path / "rewritten.py"
    path.write_text(fg.rewrite(their_source()))
    probes = [("pass1", 64, 64, 4, 3)] + [(p, *c) for p in ("pass1", "pass2") for c in fg.WIDENED_EXTRA[p]]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    out = subprocess.run(
        [sys.executable, "-c", COMPILE_FOR_SM90, str(path), json.dumps(probes)],
        capture_output=True, text=True, env=env, cwd=fg.REPO_ROOT, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    shared = json.loads(out.stdout.strip().splitlines()[-1])
    assert shared[0] > SM90_SHARED_LIMIT, f"their smallest pass-1 config needs only {shared[0]} B"
    for probe, b in zip(probes[1:], shared[1:]):
        assert b <= SM90_SHARED_LIMIT, f"widened {probe} needs {b} B"


# ---------------------------------------------------------------- their kernel on the GPU

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton kernel)")


def gpu_module(variant: fg.Variant, autotune: str) -> types.ModuleType:
    reason = fg.check_available({})
    if reason is not None:
        pytest.skip(reason)
    module, _ = fg.load_kernel_module({}, variant)
    fg.set_autotune_list(module, autotune)
    return module


def gpu_case(N=20011, K=7, d=33):
    X = make_dataset(N, K, d, seed=0, device="cuda").X
    init = shared_init(X, K, seed=0)
    dev = lambda a: torch.as_tensor(a, device="cuda")  # noqa: E731
    args = (X, dev(init.means), dev(np.log(init.variances)), dev(np.log(init.weights)))
    return X, init, args


@pytest.mark.gpu
@gpu
def test_gpu_rewritten_kernel_statistics_match_float64():
    module = gpu_module(fg.TF32X3, "widened")
    X, init, args = gpu_case()
    got = module.flash_gmm_estep_diag(*args)
    assert_statistics_match(got, float64_statistics(X.double().cpu().numpy(), init), rtol=2e-5)  # tf32x3 drops lo*lo
    assert abs(float(got[1].double().sum()) / X.shape[0] - 1.0) < 1e-6


@pytest.mark.gpu
@gpu
def test_gpu_released_kernel_overshoots_the_simplex_by_the_slab_overlap():
    module = gpu_module(fg.RELEASED, "published")
    X, _, args = gpu_case()
    N = X.shape[0]
    Nk = module.flash_gmm_estep_diag(*args)[1]
    block_n = module._diag_split_k_accum.best_config.kwargs["BLOCK_N"]
    overlap = fg.slab_overlap_rows(N, module._pick_n_split(N), block_n)
    assert overlap / N > 1e-3
    assert abs(float(Nk.double().sum()) / N - 1.0 - overlap / N) < 1e-5


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("arm", ["flash_gmm", "flash_gmm_bf16"])
def test_gpu_arm_runs_em_and_records_what_ran(arm):
    import importlib

    module = importlib.import_module(f"arms.{arm}")
    if module.available() is not None:
        pytest.skip(module.available())
    N, K, d, T = 1023, 7, 5, 3
    X = make_dataset(N, K, d, seed=0, device="cuda").X
    init = shared_init(X, K, seed=0)
    opts = {"src": None, "autotune": "widened" if arm == "flash_gmm" else "published", "reg_covar": 1e-6}
    fit = module.prepare(X, init, T, opts)()
    info = fit.info
    assert info["pass1_config"] and info["pass2_config"] and len(info["flash_gmm_sha256"]) == 64
    assert info["autotune"] == opts["autotune"]
    w = fit.weights.double().cpu().numpy()
    if arm == "flash_gmm":
        assert info["precision"] == "tf32x3" and info["modifications"] == [e.name for e in fg.TF32X3_EDITS]
        (w64, m64, v64), _ = ref.em(X.double().cpu().numpy(), init.weights, init.means, init.variances, T, 1e-6)
        for a, b in zip((fit.weights, fit.means, fit.variances), (w64, m64, v64)):
            a = a.double().cpu().numpy()
            assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-4
    else:
        assert info["precision"] == "bf16" and info["modifications"] == []
        assert abs(w.sum() - 1.0 - info["double_counted_rows"] / N) < 1e-5


# ---------------------------------------------------------------- full covariances (flash_gmm_full_h100.py)


def test_every_full_edit_matches_their_pinned_full_file_once():
    text = their_source(fg.FULL_KERNEL_FILE)
    for e in fg.TF32X3_FULL_EDITS:
        assert text.count(e.anchor) == 1, e.name
    new = fg.rewrite(text, fg.TF32X3_FULL_EDITS, origin=fg.FULL_KERNEL_FILE)
    compile(new, fg.FULL_KERNEL_FILE, "exec")
    kernels_part = new.split("def flash_gmm_estep_full")[0]
    assert "bfloat16" not in kernels_part and "torch.bfloat16" not in new
    assert new.count('input_precision="tf32x3"') == kernels_part.count("tl.dot(") == 4  # every dot of both passes


def test_full_em_loop_with_exact_statistics_matches_float64_em():
    """full_mstep and the fed-back lower precision factors, with a float64 E-step in their estep's place
    (their signature and outputs), give reference_full.em_full's fit."""
    from turbo_gmm.full import reference as reference_full

    X = make_dataset(1023, 3, 5, seed=0).X
    init = shared_init(X, 4, seed=0, covariance_type="full")

    def exact_estep(X, mu, prec_chol, log_pi):
        L = prec_chol.double().numpy()
        assert np.allclose(np.triu(L, 1), 0)  # lower triangular, as their docstring asks
        n, s, M2, _ = reference_full.estep_full(X.double().numpy(), np.exp(log_pi.double().numpy()),
                                                mu.double().numpy(), L)
        return None, torch.from_numpy(n).float(), torch.from_numpy(s).float(), torch.from_numpy(M2).float()

    w, m, c = fg.run_em_full(exact_estep, X, *(torch.as_tensor(a) for a in (init.weights, init.means,
                                                                            init.covariances)), 10, 1e-6)
    (w_ref, m_ref, c_ref, _), _ = reference_full.em_full(X.double().numpy(), init.weights, init.means,
                                                         reference_full.precisions_cholesky(init.covariances), 10)
    np.testing.assert_allclose(w.numpy(), w_ref, atol=1e-5)
    np.testing.assert_allclose(m.numpy(), m_ref, atol=1e-4)
    np.testing.assert_allclose(c.numpy(), c_ref, rtol=1e-3, atol=1e-4)


def test_rewritten_full_kernel_in_the_interpreter_matches_float64(tmp_path):
    """Their full-covariance dataflow with the fp32 edits, in Triton's CPU interpreter (fp32 dots exact; the
    tf32x3 rounding is the GPU's to check), against reference_full.estep_full's statistics."""
    import triton

    from turbo_gmm.full import reference as reference_full

    if torch.cuda.is_available() or not triton.knobs.runtime.interpret:
        pytest.skip("interpreter test: CPU only")
    cuda_assert = "assert X.is_cuda and mu.is_cuda"
    text = their_source(fg.FULL_KERNEL_FILE)
    assert text.count(cuda_assert) == 1
    text = text.replace(cuda_assert, "pass  # test only: CPU interpreter")
    module = import_text(fg.rewrite(text, fg.TF32X3_FULL_EDITS), tmp_path / "full.py", "flash_gmm_test_full")
    N, K, d = 300, 3, 5
    X = make_dataset(N, K, d, seed=0).X
    init = shared_init(X, K, seed=0, covariance_type="full")
    L = fg.lower_precision_cholesky(torch.as_tensor(init.covariances))
    logZ, *stats = module.flash_gmm_estep_full(X, torch.as_tensor(init.means), L, torch.log(torch.as_tensor(init.weights)))
    n, s, M2, ell = reference_full.estep_full(X.double().numpy(), init.weights, init.means, L.double().numpy())
    for name, g, w in zip(("Nk", "mu_acc", "sig_outer"), stats, (n, s, M2)):
        assert np.linalg.norm(g.double().numpy() - w) / np.linalg.norm(w) < 1e-5, name
    assert float(logZ.double().sum()) == pytest.approx(ell, rel=1e-5)
