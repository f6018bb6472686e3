"""IBM's Flash-GMM diagonal E-step kernel at the paper's protocol (tf32x3, slab fix).

Flash-GMM (Bloch et al., 2026; github.com/IBM/Flash-GMM) ships its diagonal
kernel as ``flash_gmm_diag_h100.py``; this repository never holds a copy of it.
``make baselines`` clones it into the git-ignored ``third_party/Flash-GMM``
(``options.src`` points at any other checkout), and this module loads it from there.

Their kernel is the E-step only, ``flash_gmm_estep_diag(X, mu, log_sigma_sq,
log_pi) -> (logZ, Nk, mu_acc, sig_acc)``, in two Triton passes: pass 1 writes the
row normalizers, pass 2 (a split-K persistent grid of K-blocks x N-slabs)
recomputes the scores and accumulates Nk, sum r*x and sum r*x^2 per CTA, then
commits ``sig_acc = sum r*(x - mu_old)^2`` with atomics. The arm supplies the
diagonal M-step (:func:`diagonal_mstep`) and feeds log-variances and
log-weights back, with no floor and no renormalization, so the gate sees exactly
what their dataflow does.

As released the file casts every ``tl.dot`` operand to bf16, and pass 2 masks the
rows of a slab's last BLOCK_N block only against N, not against the slab's end,
so each slab boundary's overhang is counted twice (Sigma pi > 1 at every shape).
This arm (``flash_gmm``) applies :data:`TF32X3_EDITS` to the user's checkout at
load time (fp32 operands, ``input_precision="tf32x3"``, slab rows masked at the
slab end), writes the result to a cache file and imports it;
``arms.flash_gmm_bf16`` imports the file as released. Each edit's anchor must
occur exactly once, or loading fails naming the edit.

Full covariances (``covariance_type="full"``): their ``flash_gmm_full_h100.py`` (the full-covariance
update, 1031da0c, in the pinned commit), ``flash_gmm_estep_full(X, mu, prec_chol, log_pi) -> (logZ, Nk,
mu_acc, sig_outer)`` with ``prec_chol`` the lower Cholesky factor of each precision and ``sig_outer`` the
uncentered second moments; two launches (row normalizers, then atomic-add statistics), one fixed config
(BLOCK_N 256, BLOCK_K 64, 8 warps, 3 stages), no autotuner. The arm's M-step (:func:`full_mstep`, fp32, no
floor but reg_covar) is the diagonal one's with Sigma_k = sig_outer_k / Nk - mu_k mu_k^T + reg_covar I. As
released every ``tl.dot`` operand is bf16; ``flash_gmm`` applies :data:`TF32X3_FULL_EDITS` (fp32 operands,
tf32x3 dots), ``flash_gmm_bf16`` imports it as released. No slab edit: its pass 2 tiles rows without slabs.

Autotune: ``options.autotune`` = ``published`` (their lists) or ``widened``
(their lists plus :data:`WIDENED_EXTRA`, the small blocks fp32 needs at d=128,
as the paper did), installed on their ``Autotuner`` objects at run time. Their
tuning key holds N, so the harness's untimed warm-up call tunes.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import torch

from turbo_gmm.records import Fit, Init

MEMORY = "torch"
COVARIANCE_TYPES = ("diag", "full")
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = "third_party/Flash-GMM"
KERNEL_FILE = "flash_gmm_diag_h100.py"
PINNED_COMMIT = "f3077ffe5d7e2522b9a1db8be1698ca5435d9609"
ENTRY = "flash_gmm_estep_diag"
PASS_KERNELS = {"pass1": "_diag_lse_kernel", "pass2": "_diag_split_k_accum"}
FULL_KERNEL_FILE = "flash_gmm_full_h100.py"
FULL_ENTRY = "flash_gmm_estep_full"


@dataclass(frozen=True)
class Edit:
    """One exact source substitution; ``anchor`` must occur exactly once."""

    name: str
    anchor: str
    replacement: str
    why: str


TF32X3_EDITS: tuple[Edit, ...] = (
    Edit(
        "host-fp32-operands",
        "mu_wT_bf         = mu_w.to(torch.bfloat16).t().contiguous()\n"
        "    inv_sigma_sqT_bf = inv_sigma_sq.to(torch.bfloat16).t().contiguous()",
        "mu_wT_bf         = mu_w.t().contiguous()  # turbo-gmm: fp32 (name kept)\n"
        "    inv_sigma_sqT_bf = inv_sigma_sq.t().contiguous()  # turbo-gmm: fp32 (name kept)",
        "the (D, K) precision-weighted means and precisions stay fp32 instead of bf16",
    ),
    Edit(
        "pass1-fp32-rows",
        "    x_bf = x.to(tl.bfloat16)\n    x_sq_bf = x_sq.to(tl.bfloat16)",
        "    x_bf = x  # turbo-gmm: fp32 (name kept)\n    x_sq_bf = x_sq",
        "pass 1's x and x*x tiles stay fp32",
    ),
    Edit(
        "pass1-tf32x3-dots",
        "xsq_dot = tl.dot(x_sq_bf, inv_sT_blk, out_dtype=tl.float32)\n"
        "        xmuw    = tl.dot(x_bf,    mu_wT_blk,  out_dtype=tl.float32)\n\n",
        'xsq_dot = tl.dot(x_sq_bf, inv_sT_blk, out_dtype=tl.float32, input_precision="tf32x3")\n'
        '        xmuw    = tl.dot(x_bf,    mu_wT_blk,  out_dtype=tl.float32, input_precision="tf32x3")\n\n',
        "pass 1's two score dots run at tf32x3 (fp32 operands alone would give Triton's default tf32)",
    ),
    Edit(
        "pass2-slab-end-mask",
        "        n_mask = n_off < N\n",
        "        n_mask = (n_off < N) & (n_off < n_end)  # turbo-gmm: stop at the slab end\n",
        "pass 2's last BLOCK_N block of a slab reaches past the slab end into the next slab;"
        " masking only against N counts those rows twice",
    ),
    Edit(
        "pass2-fp32-rows",
        "x_bf = x.to(tl.bfloat16)\n        x_sq_bf = (x * x).to(tl.bfloat16)",
        "x_bf = x  # turbo-gmm: fp32 (name kept)\n        x_sq_bf = x * x",
        "pass 2's x and x*x tiles stay fp32",
    ),
    Edit(
        "pass2-tf32x3-score-dots",
        "(one BLOCK_K slice of the K dimension)\n"
        "        xsq_dot = tl.dot(x_sq_bf, inv_sT_blk, out_dtype=tl.float32)\n"
        "        xmuw    = tl.dot(x_bf,    mu_wT_blk,  out_dtype=tl.float32)",
        "(one BLOCK_K slice of the K dimension)\n"
        '        xsq_dot = tl.dot(x_sq_bf, inv_sT_blk, out_dtype=tl.float32, input_precision="tf32x3")\n'
        '        xmuw    = tl.dot(x_bf,    mu_wT_blk,  out_dtype=tl.float32, input_precision="tf32x3")',
        "pass 2 recomputes the same scores as pass 1, at the same precision",
    ),
    Edit(
        "pass2-fp32-responsibilities",
        "r_bf = r.to(tl.bfloat16)",
        "r_bf = r  # turbo-gmm: fp32 (name kept)",
        "the responsibilities enter the statistics dots in fp32",
    ),
    Edit(
        "pass2-tf32x3-statistics-dots",
        "tl.dot(tl.trans(r_bf), x_bf,    out_dtype=tl.float32)\n"
        "        rxsq_local += tl.dot(tl.trans(r_bf), x_sq_bf, out_dtype=tl.float32)",
        'tl.dot(tl.trans(r_bf), x_bf,    out_dtype=tl.float32, input_precision="tf32x3")\n'
        '        rxsq_local += tl.dot(tl.trans(r_bf), x_sq_bf, out_dtype=tl.float32, input_precision="tf32x3")',
        "sum r*x and sum r*x^2 accumulate at tf32x3",
    ),
)

_FULL_SCORE = "v_d2 = tl.dot(x_bf, tl.trans(LT_d2), out_dtype=tl.float32)"
_FULL_SCORE_TF32X3 = 'v_d2 = tl.dot(x_bf, tl.trans(LT_d2), out_dtype=tl.float32, input_precision="tf32x3")'
TF32X3_FULL_EDITS: tuple[Edit, ...] = (
    Edit("host-fp32-factors", "LT_bf = LT.to(torch.bfloat16).contiguous()",
         "LT_bf = LT.contiguous()  # turbo-gmm: fp32 (name kept)",
         "the transposed precision factors stay fp32 instead of bf16"),
    Edit("pass1-fp32-rows", "# (BLOCK_N, BLOCK_D)\n    x_bf = x.to(tl.bfloat16)",
         "# (BLOCK_N, BLOCK_D)\n    x_bf = x  # turbo-gmm: fp32 (name kept)", "pass 1's x tile stays fp32"),
    Edit("pass1-tf32x3-score-dots", "(BLOCK_N, BLOCK_K)\n            " + _FULL_SCORE,
         "(BLOCK_N, BLOCK_K)\n            " + _FULL_SCORE_TF32X3, "pass 1's Mahalanobis products run at tf32x3"),
    Edit("pass2-fp32-rows", "other=0.0)\n    x_bf = x.to(tl.bfloat16)",
         "other=0.0)\n    x_bf = x  # turbo-gmm: fp32 (name kept)", "pass 2's x tile stays fp32"),
    Edit("pass2-tf32x3-score-dots", "        )\n        " + _FULL_SCORE, "        )\n        " + _FULL_SCORE_TF32X3,
         "pass 2 recomputes the same scores as pass 1, at the same precision"),
    Edit("pass2-fp32-responsibilities", "r_bf = r.to(tl.bfloat16)", "r_bf = r  # turbo-gmm: fp32 (name kept)",
         "the responsibilities enter the statistics dots in fp32"),
    Edit("pass2-tf32x3-means-dot", "mu_block = tl.dot(tl.trans(r_bf), x_bf, out_dtype=tl.float32)",
         'mu_block = tl.dot(tl.trans(r_bf), x_bf, out_dtype=tl.float32, input_precision="tf32x3")',
         "sum r*x accumulates at tf32x3"),
    Edit("pass2-fp32-weighted-rows", "rx_d2_bf = (r * x_d2[:, None]).to(tl.bfloat16)",
         "rx_d2_bf = r * x_d2[:, None]  # turbo-gmm: fp32 (name kept)", "r * x_d2 stays fp32"),
    Edit("pass2-tf32x3-moments-dot", "sig_d2_row = tl.dot(tl.trans(rx_d2_bf), x_bf, out_dtype=tl.float32)",
         'sig_d2_row = tl.dot(tl.trans(rx_d2_bf), x_bf, out_dtype=tl.float32, input_precision="tf32x3")',
         "sum r x x^T accumulates at tf32x3"),
)

# (BLOCK_N, BLOCK_K, num_warps, num_stages) added by autotune=widened: the small
# blocks fp32 needs at d = 128. Shared memory per block, from compiling the
# rewritten (tf32x3) kernels for sm_90 with Triton 3.6 at BLOCK_D = 128, against
# the 227 KiB (232448 B) a block may use on H100/H200: every published pass-1
# config overflows (smallest: (64, 64, 4, 3) at 320 KiB; x and x*x stay resident
# and each stage holds two 128 x BLOCK_K operand tiles), so no published list
# launches at d = 128; the pass-1 additions need 96 to 224 KiB. Published pass 2
# has three configs that fit (BLOCK_K = 32, 129-193 KiB); its additions (64-128 KiB)
# give the tuner smaller accumulators (two BLOCK_K x 128 fp32 tiles in registers).
WIDENED_EXTRA = {
    "pass1": ((32, 32, 4, 2), (32, 64, 4, 2), (64, 32, 4, 2), (32, 32, 4, 3), (32, 64, 4, 3), (64, 32, 4, 3)),
    "pass2": ((32, 16, 4, 2), (32, 32, 4, 2), (64, 16, 4, 2), (64, 32, 4, 2)),
}
AUTOTUNE_LISTS = ("published", "widened")


class RewriteMismatch(RuntimeError):
    """Their file no longer matches what the tf32x3 rewrite expects."""


def rewrite(text: str, edits=TF32X3_EDITS, origin: str = KERNEL_FILE) -> str:
    """Apply ``edits`` in order; every anchor must occur exactly once, else one error naming them all."""
    wrong = [(e, text.count(e.anchor)) for e in edits if text.count(e.anchor) != 1]
    if wrong:
        listed = "; ".join(f"edit '{e.name}' ({e.why}) found its anchor {n} times" for e, n in wrong)
        raise RewriteMismatch(
            f"{origin} no longer matches what arms/flash_gmm.py's rewrite expects "
            f"(written against IBM/Flash-GMM commit {PINNED_COMMIT}): {listed}, expected exactly once. "
            "Check out that commit (make baselines) or update TF32X3_EDITS."
        )
    for e in edits:
        if text.count(e.anchor) != 1:  # an earlier edit disturbed this anchor: the list itself is wrong
            raise RewriteMismatch(f"rewrite edit '{e.name}': anchor changed by an earlier edit")
        text = text.replace(e.anchor, e.replacement)
    return text


def diagonal_mstep(Nk, mu_acc, sig_acc, mu_old, N: int, reg_covar: float):
    """(weights, means, variances) from Flash-GMM's statistics (torch or NumPy arrays).

    ``sig_acc`` is about the *old* means: sum r (x - mu_old)^2 / Nk - (mu_new - mu_old)^2
    = E_r[x^2] - mu_new^2. No floor, no renormalization of the weights.
    """
    weights = Nk / N
    means = mu_acc / Nk[:, None]
    variances = sig_acc / Nk[:, None] - (means - mu_old) ** 2 + reg_covar
    return weights, means, variances


def full_mstep(Nk, mu_acc, sig_outer, N: int, reg_covar: float):
    """(weights, means, covariances) from the full kernel's statistics, in their dtype (fp32): its docstring's
    recovery plus reg_covar on the diagonal. No floor, no renormalization, no symmetrization."""
    weights = Nk / N
    means = mu_acc / Nk[:, None]
    cov = sig_outer / Nk[:, None, None] - means[:, :, None] * means[:, None, :]
    return weights, means, cov + reg_covar * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)


def lower_precision_cholesky(cov: torch.Tensor) -> torch.Tensor:
    """L lower triangular with L L^T = cov^-1 (their ``prec_chol``); NaN where cov is not positive definite."""
    C, info = torch.linalg.cholesky_ex(cov)
    L, info2 = torch.linalg.cholesky_ex(torch.cholesky_inverse(C))
    return torch.where(((info == 0) & (info2 == 0))[:, None, None], L, torch.nan)


def run_em_full(estep: Callable, X: torch.Tensor, weights, means, cov, n_iter: int, reg_covar: float):
    """``n_iter`` iterations of their full E-step + :func:`full_mstep`, feeding back log-weights and factors."""
    for _ in range(n_iter):
        _, Nk, mu_acc, sig_outer = estep(X, means, lower_precision_cholesky(cov), torch.log(weights))
        weights, means, cov = full_mstep(Nk, mu_acc, sig_outer, X.shape[0], reg_covar)
    return weights, means, cov


def run_em(estep: Callable, X: torch.Tensor, weights, means, variances, n_iter: int, reg_covar: float):
    """``n_iter`` iterations of E-step kernel + :func:`diagonal_mstep`, feeding back logs."""
    log_pi, log_var = torch.log(weights), torch.log(variances)
    for _ in range(n_iter):
        _, Nk, mu_acc, sig_acc = estep(X, means, log_var, log_pi)
        weights, means, variances = diagonal_mstep(Nk, mu_acc, sig_acc, means, X.shape[0], reg_covar)
        log_pi, log_var = torch.log(weights), torch.log(variances)
    return weights, means, variances


def slab_overlap_rows(N: int, n_split: int, block_n: int) -> int:
    """Rows the released pass 2 counts once too often (summed over its N-slabs).

    A slab is ``chunk = ceil(N / n_split)`` rows walked in BLOCK_N steps, so it covers
    ``ceil(chunk / BLOCK_N) * BLOCK_N`` rows clipped only to N.
    """
    chunk = -(-N // n_split)
    walked = -(-chunk // block_n) * block_n
    return sum(min(N, s * chunk + walked) - min(N, (s + 1) * chunk) for s in range(n_split) if s * chunk < N)


def source_dir(opts: Mapping | None) -> Path:
    src = (opts or {}).get("src")
    return Path(src).expanduser() if src else REPO_ROOT / DEFAULT_SRC


def check_available(opts: Mapping | None) -> str | None:
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return f"triton is not importable ({e})"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU (Triton kernel)"
    for name in (KERNEL_FILE, FULL_KERNEL_FILE):
        if not (source_dir(opts) / name).is_file():
            return f"run make baselines (looked in {source_dir(opts) / name})"
    return None


def available(opts: Mapping | None = None) -> str | None:
    return check_available(opts)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "turbo-gmm"


def _import_file(path: Path, name: str):
    """Import a file as a real module (Triton's JIT reads kernel source through inspect)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _checkout_commit(src: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


@dataclass(frozen=True)
class Variant:
    """How one arm loads their file: edits to apply (none = as released) and its labels."""

    edits: tuple[Edit, ...]
    precision: str
    tag: str
    full_edits: tuple[Edit, ...] = ()  # the same for their full-covariance file


TF32X3 = Variant(TF32X3_EDITS, "tf32x3", "tf32x3", TF32X3_FULL_EDITS)
RELEASED = Variant((), "bf16", "released")


def load_kernel_module(opts: Mapping | None, variant: Variant, kernel_file: str = KERNEL_FILE):
    """(module, facts): their ``kernel_file``, rewritten by the variant's edits for it, imported; facts for
    ``Fit.info``."""
    full = kernel_file == FULL_KERNEL_FILE
    edits = variant.full_edits if full else variant.edits
    src = source_dir(opts)
    path = src / kernel_file
    if not path.is_file():
        raise FileNotFoundError(f"Flash-GMM checkout missing: run make baselines (looked in {path})")
    text = path.read_text()
    sha = hashlib.sha256(text.encode()).hexdigest()
    stem = Path(kernel_file).stem
    if edits:
        new = rewrite(text, edits, origin=str(path))
        header = (
            f"# Generated by turbo-gmm arms/flash_gmm.py from {path} (sha256 {sha}).\n"
            f"# Edits: {', '.join(e.name for e in edits)}. Do not edit: regenerated on load.\n"
        )
        new = header + new
        out = _cache_dir() / f"{stem}_{variant.tag}_{hashlib.sha256(new.encode()).hexdigest()[:16]}.py"
        if not out.is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(new)
            os.replace(tmp, out)  # atomic: parallel workers may race here
        load_path = out
    else:
        load_path = path
    module = _import_file(load_path, f"{stem}_{variant.tag}_{sha[:16]}")
    facts = {
        "flash_gmm_commit": _checkout_commit(src),
        "flash_gmm_sha256": sha,
        "flash_gmm_loaded_from": str(load_path),
        "modifications": [e.name for e in edits],
        "precision": variant.precision,
    }
    return module, facts


def set_autotune_list(module, name: str) -> None:
    """Install the ``published`` or ``widened`` config lists on their two autotuners.

    The published lists are rebuilt from their own ``_pass*_configs()`` so that this is
    idempotent; the per-key cache of chosen configs is cleared so the next call re-tunes.
    """
    import triton

    if name not in AUTOTUNE_LISTS:
        raise ValueError(f"autotune must be one of {AUTOTUNE_LISTS}, got {name!r}")
    published = {"pass1": module._pass1_configs(), "pass2": module._pass2_configs()}
    for p, kernel_name in PASS_KERNELS.items():
        tuner = getattr(module, kernel_name)
        if not isinstance(tuner, triton.runtime.autotuner.Autotuner):
            raise TypeError(f"{kernel_name} in their file is no longer a triton Autotuner")
        configs = list(published[p])
        if name == "widened":
            configs += [
                triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=nw, num_stages=ns)
                for (bn, bk, nw, ns) in WIDENED_EXTRA[p]
            ]
        tuner.configs = configs
        tuner.cache = {}
        tuner.best_config = None


def chosen_configs(module) -> dict:
    """The triton.Config each pass's autotuner picked on its last call (None before any call)."""
    return {p: getattr(getattr(module, name), "best_config", None) for p, name in PASS_KERNELS.items()}


def prepare_variant(X: torch.Tensor, init: Init, n_iter: int, opts: Mapping, variant: Variant):
    """The contract's ``prepare`` for either variant of their kernel."""
    reason = check_available(opts)
    if reason is not None:
        raise RuntimeError(f"Flash-GMM unavailable: {reason}")
    if opts.get("covariance_type", "diag") == "full":
        return _prepare_full(X, init, n_iter, opts, variant)
    module, facts = load_kernel_module(opts, variant)
    autotune = opts.get("autotune") or "published"
    set_autotune_list(module, autotune)
    estep = getattr(module, ENTRY)
    reg_covar = float(opts["reg_covar"])
    N = X.shape[0]
    n_split = module._pick_n_split(N)
    slab_fixed = "pass2-slab-end-mask" in facts["modifications"]
    w0, m0, v0 = (
        torch.as_tensor(a, dtype=torch.float32, device=X.device) for a in (init.weights, init.means, init.variances)
    )

    def run() -> Fit:
        w, m, v = run_em(estep, X, w0, m0, v0, n_iter, reg_covar)
        torch.cuda.synchronize(X.device)
        chosen = chosen_configs(module)
        info = dict(facts, algorithm="flash_gmm_two_pass", autotune=autotune, n_split=n_split)
        info.update({f"{p}_config": None if c is None else str(c) for p, c in chosen.items()})
        if chosen["pass2"] is not None:  # the rows each E-step counts twice (0 once fixed)
            block_n = chosen["pass2"].kwargs["BLOCK_N"]
            info["double_counted_rows"] = 0 if slab_fixed else slab_overlap_rows(N, n_split, block_n)
        return Fit(w, m, v, n_iter=n_iter, info=info)

    return run


def _prepare_full(X: torch.Tensor, init: Init, n_iter: int, opts: Mapping, variant: Variant):
    """Their full-covariance E-step (fixed config, no autotuner) and :func:`full_mstep`."""
    module, facts = load_kernel_module(opts, variant, FULL_KERNEL_FILE)
    estep = getattr(module, FULL_ENTRY)
    reg_covar = float(opts["reg_covar"])
    w0, m0, c0 = (torch.as_tensor(a, dtype=torch.float32, device=X.device)
                  for a in (init.weights, init.means, init.covariances))

    def run() -> Fit:
        w, m, c = run_em_full(estep, X, w0, m0, c0, n_iter, reg_covar)
        if X.is_cuda:
            torch.cuda.synchronize(X.device)
        return Fit(w, m, None, n_iter=n_iter, covariances=c,
                   info=dict(facts, algorithm="flash_gmm_full_two_pass", kernel_file=FULL_KERNEL_FILE))

    return run


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    return prepare_variant(X, init, n_iter, opts, TF32X3)
