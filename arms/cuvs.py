"""cuVS's C++ GMM (``cuvs::cluster::gmm::fit``, cuVS 26.10) through a small C++ shim.

cuVS ships no Python or C binding for its GMM, so ``arms/cuvs_shim.cpp`` wraps ``fit``
behind ``extern "C"`` functions on raw device pointers. It is built on first use with
g++ against the headers and libraries of the pip wheels (libcuvs-cu13, libraft-cu13,
librmm-cu13, rapids-logger, libkvikio-cu13) and cached under
``~/.cache/turbo-gmm/`` by a hash of the source, flags and paths (``build_command()``
prints the exact command). X and the parameters stay torch CUDA tensors; the shim
runs on torch's current stream.

Protocol: DIAG, ``warm_start=true`` from the shared init (variances, not precisions),
``max_iter = n_iter`` and ``tol = 0`` (cuVS stops on ``|lb - prev| < tol``, never true
at 0), ``n_init = 1``, the harness's ``reg_covar``. Full covariances (``covariance_type="full"``):
``covariance_type::FULL`` with the shared init's (K, d, d) covariances as the warm start, written
back in place; not run yet (the GPU image has no cuVS wheels). fp32 throughout; cuVS uses its own
cuBLAS handle, unaffected by torch's TF32 flags (default math, no TF32).

End to end (``prepare_e2e``, the e2e protocol): the same call with ``warm_start=false``, so cuVS
runs its own default initialization, ``tol`` and ``max_iter`` of the protocol, DIAG or FULL by the cell's
covariance type.

The extra E-step: after its loop ``fit`` restores the best parameters and runs one more
E-step over all rows for the hard labels, so a fit of T iterations does T + 1 E-steps.
The timed call is the whole ``fit`` (the library's own cost of a fit, as for
scikit-learn), and ``prepare`` measures, untimed, what that costs: from the minimum
wall times f0, f1, f2 of fits with max_iter = 0, 1, 2, ``em_iter_ms`` = f2 - f1 (one EM
iteration), ``outside_loop_ms`` = 2 f1 - f2 (what a fit spends outside its EM loop:
warm-start precision update, the labels E-step, copies) and ``extra_estep_ms`` =
f0 + f2 - 2 f1 (cuVS's max_iter = 0 path runs one E-step without M-step plus the labels
E-step, so f0 - outside_loop is one E-step). All three go into ``Fit.info``.

Memory (``MEMORY = "arm"``): RMM allocations are invisible to torch. The shim installs
one ``rmm::mr::statistics_resource_adaptor`` per device as the current device resource,
before the first raft handle exists, keeps it for the rest of the process, and reads
the peak of each fit (push/pop of its counters);
``peak_bytes()`` = that RMM peak of the last fit + the bytes of X and of the parameter,
init and label buffers this module allocates. cuBLAS/cuSOLVER workspaces and thrust's
temporaries (cudaMalloc'd directly) are not counted; the worker's NVML figure is the
cross-check.

nvJitLink: torch 2.11 loads nvJitLink 13.0; libcuvs needs the ``__nvJitLink*_13_3``
symbols of nvJitLink >= 13.3. ``preload()`` loads the newer library (the
``nvidia-nvjitlink`` wheel, >= 13.3, found through its installed metadata) with
RTLD_GLOBAL before libcuvs is loaded. The loader then resolves libcuvs's ``_13_3``
references from it even when torch's 13.0 copy, which lacks them, was loaded first
(the versioned lookup matches the version name, not the file); torch keeps its own
copy. Calling ``preload()`` before ``import torch`` also works: 13.5 exports the
``_13_0`` symbols torch's libraries use.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import weakref
from pathlib import Path

from turbo_gmm.records import Fit, Init

MEMORY = "arm"
COVARIANCE_TYPES = ("diag", "full")
SHIM_SOURCE = Path(__file__).with_name("cuvs_shim.cpp")
CXXFLAGS = ("-std=c++20", "-O2", "-fPIC", "-DRAFT_SYSTEM_LITTLE_ENDIAN=1", "-Wno-deprecated-declarations")
WHEEL_PACKAGES = {  # import name -> pip distribution
    "libcuvs": "libcuvs-cu13==26.10.0",
    "libraft": "libraft-cu13==26.10.0",
    "librmm": "librmm-cu13==26.10.0",
    "rapids_logger": "rapids-logger==0.3.0",
    "libkvikio": "libkvikio-cu13==26.10.0",
}
NVJITLINK_MIN = (13, 3)  # libcuvs imports __nvJitLink*_13_3
NVJITLINK_SYMBOL = "__nvJitLinkCreate_13_3"
CUDA_DEPENDENCIES = ("libcublasLt.so.13", "libcublas.so.13", "libcusparse.so.12", "libcusolver.so.12",
                     "libcurand.so.10", "libnvrtc.so.13", "libnccl.so.2")  # libcuvs's NEEDED, from torch's wheels
MAX_COMPONENTS = 65535  # params::n_components limit
MAX_ROWS = 2**31 - 1  # cuVS indexes rows with int

_state: dict = {}  # preload handle, loaded shim, last fit's peak
SITE_ENV = "TURBO_GMM_CUVS_SITE"
DEFAULT_SITE = Path(__file__).resolve().parents[1] / ".venv" / "cuvs-site"  # make install-offline's --target


def use_wheel_site() -> None:
    """Put the folder the cuVS wheels were installed into with ``--target`` ($TURBO_GMM_CUVS_SITE,
    else .venv/cuvs-site) on sys.path of this process only: the cuVS cell's worker."""
    site = os.environ.get(SITE_ENV) or str(DEFAULT_SITE)
    if Path(site).is_dir() and site not in sys.path:
        sys.path.append(site)
        importlib.invalidate_caches()


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def pick_nvjitlink(candidates) -> tuple[Path | None, str]:
    """Newest ``(version, path)`` with version >= 13.3, else (None, reason naming what was found)."""
    good = [(_version_tuple(v), Path(p)) for v, p in candidates if _version_tuple(v) >= NVJITLINK_MIN]
    if good:
        return max(good)[1], ""
    found = ", ".join(sorted(v for v, _ in candidates)) or "none"
    return None, (f"nvJitLink >= {NVJITLINK_MIN[0]}.{NVJITLINK_MIN[1]} not installed (found: {found}); "
                  "pip install --no-deps 'nvidia-nvjitlink>=13.3,<14'")


def _nvjitlink_candidates() -> list[tuple[str, str]]:
    """(version, libnvJitLink.so.13 path) of every installed nvidia-nvjitlink distribution on sys.path."""
    out = []
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if not name.startswith("nvidia-nvjitlink"):
            continue
        for f in dist.files or ():
            if f.name == "libnvJitLink.so.13":
                path = Path(dist.locate_file(f))
                if path.is_file():
                    out.append((dist.version, str(path)))
    return out


def preload() -> str | None:
    """Load nvJitLink >= 13.3 with RTLD_GLOBAL (idempotent, before or after torch). Never raises.

    Returns None on success, else the reason (also reported by ``available()``).
    """
    if "nvjitlink" in _state:
        return _state["nvjitlink"] if isinstance(_state["nvjitlink"], str) else None
    use_wheel_site()
    path, reason = pick_nvjitlink(_nvjitlink_candidates())
    if path is not None:
        try:
            lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            if not hasattr(lib, NVJITLINK_SYMBOL):
                reason = f"{path} lacks {NVJITLINK_SYMBOL}"
            else:
                _state["nvjitlink"] = lib
                return None
        except OSError as e:
            reason = f"cannot load {path}: {e}"
    _state["nvjitlink"] = reason
    return reason


def _cuda_home_candidates() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    out = [Path(r) for r in roots if r]
    for entry in sys.path:  # the CUDA wheels torch installs: site-packages/nvidia/cu13
        if entry and (Path(entry) / "nvidia" / "cu13").is_dir():
            out.append(Path(entry) / "nvidia" / "cu13")
    return out


def _find_cuda_include() -> Path | None:
    return next((r / "include" for r in _cuda_home_candidates() if (r / "include" / "cuda_runtime_api.h").is_file()),
                None)


def _find_cudart() -> Path | None:
    for root in _cuda_home_candidates():
        for sub in ("lib64", "lib"):
            for name in ("libcudart.so", "libcudart.so.13"):
                if (root / sub / name).is_file():
                    return root / sub / name
    return None


def _wheel_dirs() -> dict[str, Path]:
    dirs = {name: _package_dir(name) for name in WHEEL_PACKAGES}
    missing = [WHEEL_PACKAGES[n] for n, p in dirs.items() if p is None]
    if missing:
        raise RuntimeError("cuVS wheels not installed: " + " ".join(missing) + " (see README, cuVS install)")
    return dirs


def build_command(output: Path) -> list[str]:
    """The g++ command that builds the shim; the include order matters (README, cuVS)."""
    w = _wheel_dirs()
    cuda_inc, cudart = _find_cuda_include(), _find_cudart()
    if cuda_inc is None:
        raise RuntimeError("cuda_runtime_api.h not found (looked in $CUDA_HOME, /usr/local/cuda, nvidia/cu13)")
    if cudart is None:
        raise RuntimeError("libcudart not found (looked in $CUDA_HOME, /usr/local/cuda, nvidia/cu13)")
    libdirs = [w["libcuvs"] / "lib64", w["librmm"] / "lib64", cudart.parent]
    return [
        os.environ.get("CXX", "g++"), *CXXFLAGS, "-shared",
        # librmm's bundled CCCL (3.5) must precede the toolkit's, or cuda/stream fails to compile
        f"-I{w['librmm'] / 'include' / 'rapids'}",
        f"-I{w['libcuvs'] / 'include'}",
        f"-I{w['libraft'] / 'include'}",
        f"-I{w['librmm'] / 'include'}",
        f"-I{w['rapids_logger'] / 'include'}",
        f"-I{cuda_inc}",
        str(SHIM_SOURCE), "-o", str(output),
        f"-L{libdirs[0]}", "-lcuvs", f"-L{libdirs[1]}", "-lrmm", str(cudart),
        "-Wl,--no-undefined", *(f"-Wl,-rpath,{d}" for d in libdirs),
    ]


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "turbo-gmm"


def shim_path() -> Path:
    """Cached shim for this source + command (paths and versions included)."""
    key = hashlib.sha256(SHIM_SOURCE.read_bytes())
    key.update("\0".join(build_command(Path("OUT"))).encode())
    key.update(importlib.metadata.version("libcuvs-cu13").encode())
    return _cache_dir() / f"cuvs_shim-{key.hexdigest()[:16]}.so"


def build_shim() -> Path:
    """Compile the shim unless cached; atomic (build to a temp name, then rename)."""
    out = shim_path()
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.tmp.so")
    cmd = build_command(tmp)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the cuVS shim failed:\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")
    os.replace(tmp, out)
    return out


def _load_cuda_dependencies() -> None:
    """libcuvs's NEEDED NVIDIA libraries: the copies torch loaded, else those of torch's CUDA wheels.

    libcuvs's RPATH only reaches its own site dir; torch's wheels may sit in another.
    A library found nowhere is left for libcuvs's own load error to name.
    """
    for soname in CUDA_DEPENDENCIES:
        try:
            ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
            continue  # already loaded (by torch)
        except OSError:
            pass
        found = (Path(e) / sub / soname for e in sys.path if e for sub in ("nvidia/cu13/lib", "nvidia/nccl/lib"))
        path = next((p for p in found if p.is_file()), None)
        if path is not None:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def _load_shim() -> ctypes.CDLL:
    """nvJitLink >= 13.3, then rapids-logger, kvikio, rmm, raft, cuvs (RTLD_GLOBAL), then the shim."""
    if "shim" in _state:
        return _state["shim"]
    reason = preload()
    if reason:
        raise RuntimeError(reason)
    import torch  # noqa: F401 -- loads the CUDA libraries libcuvs needs (cuBLAS, cuSOLVER, ...)

    _load_cuda_dependencies()
    w = _wheel_dirs()
    libs = [w["rapids_logger"] / "lib64" / "librapids_logger.so", w["libkvikio"] / "lib64" / "libkvikio.so",
            w["librmm"] / "lib64" / "librmm.so", w["libraft"] / "lib64" / "libraft.so",
            w["libcuvs"] / "lib64" / "libcuvs.so"]
    for lib in libs:
        try:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            hint = (" (libcuvs needs nvJitLink >= 13.3 loaded with RTLD_GLOBAL before it: arms.cuvs.preload())"
                    if "nvJitLink" in str(e) else "")
            raise RuntimeError(f"cannot load {lib}: {e}{hint}") from e
    shim = ctypes.CDLL(str(build_shim()))
    c = ctypes
    shim.turbo_cuvs_session_create.argtypes = [c.POINTER(c.c_void_p), c.c_char_p, c.c_size_t]
    shim.turbo_cuvs_session_destroy.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t]
    shim.turbo_cuvs_gmm_fit.argtypes = (
        [c.c_void_p] * 9 + [c.c_int64, c.c_int64, c.c_int, c.c_int, c.c_int, c.c_double, c.c_double, c.c_int]
        + [c.POINTER(c.c_float), c.POINTER(c.c_int), c.POINTER(c.c_int), c.POINTER(c.c_int64), c.c_char_p, c.c_size_t]
    )
    for fn in (shim.turbo_cuvs_session_create, shim.turbo_cuvs_session_destroy, shim.turbo_cuvs_gmm_fit):
        fn.restype = c.c_int
    _state["shim"] = shim
    return shim


def available() -> str | None:
    try:
        import torch
    except ImportError as e:
        return f"torch not importable: {e}"
    if not torch.cuda.is_available():
        return "cuVS needs a CUDA device; none is visible"
    use_wheel_site()
    try:
        _wheel_dirs()
    except RuntimeError as e:
        return str(e)
    reason = preload()
    if reason:
        return reason
    try:
        if not shim_path().is_file() and shutil.which(os.environ.get("CXX", "g++")) is None:
            return f"C++ compiler {os.environ.get('CXX', 'g++')!r} not found; it builds the cuVS shim"
    except RuntimeError as e:  # CUDA headers or libcudart missing
        return str(e)
    return None


def peak_bytes() -> int:
    """RMM peak of the last fit + X + the buffers this module holds on the device."""
    if "peak" not in _state:
        raise RuntimeError("peak_bytes() before any cuVS fit ran")
    return _state["peak"]


class _Session:
    """One raft handle (shim session), destroyed with this object."""

    def __init__(self, shim):
        self.shim, self.err = shim, ctypes.create_string_buffer(4096)
        ptr = ctypes.c_void_p()
        if shim.turbo_cuvs_session_create(ctypes.byref(ptr), self.err, len(self.err)):
            raise RuntimeError(f"cuVS session: {self.err.value.decode()}")
        self.ptr = ptr
        self._finalizer = weakref.finalize(self, shim.turbo_cuvs_session_destroy, ptr, None, 0)


def prepare(X, init: Init, n_iter: int, opts: dict):
    import torch

    if X.device.type != "cuda" or X.dtype != torch.float32 or not X.is_contiguous():
        raise ValueError(f"cuVS needs X as a contiguous float32 CUDA tensor, got {X.dtype} on {X.device}")
    N, d = X.shape
    K = int(init.means.shape[0])
    if K > MAX_COMPONENTS:
        raise ValueError(f"cuVS supports at most {MAX_COMPONENTS} components, got K={K}")
    if N > MAX_ROWS:
        raise ValueError(f"cuVS indexes rows with a 32-bit int: N={N} > {MAX_ROWS}")
    shim = _load_shim()
    session = _Session(shim)
    dev = X.device
    full = opts.get("covariance_type", "diag") == "full"  # covariance_type::FULL: (K, d, d) covariances
    w0, m0, v0 = (torch.as_tensor(a, dtype=torch.float32, device=dev).contiguous()
                  for a in (init.weights, init.means, init.covariances if full else init.variances))
    w, m, v = torch.empty_like(w0), torch.empty_like(m0), torch.empty_like(v0)
    pchol, prec = torch.empty_like(v0), torch.empty_like(v0)
    labels = torch.empty(N, dtype=torch.int32, device=dev)
    held = sum(t.numel() * t.element_size() for t in (X, w0, m0, v0, w, m, v, pchol, prec, labels))
    reg_covar = float(opts["reg_covar"])
    lb, it, conv, peak = ctypes.c_float(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int64()

    def fit(max_iter: int) -> None:
        w.copy_(w0)
        m.copy_(m0)
        v.copy_(v0)
        stream = torch.cuda.current_stream(dev).cuda_stream
        rc = shim.turbo_cuvs_gmm_fit(
            session.ptr, stream, X.data_ptr(), w.data_ptr(), m.data_ptr(), v.data_ptr(), pchol.data_ptr(),
            prec.data_ptr(), labels.data_ptr(), N, d, K, int(full), max_iter, reg_covar, 0.0, 1,
            ctypes.byref(lb), ctypes.byref(it), ctypes.byref(conv), ctypes.byref(peak), session.err, len(session.err))
        if rc:
            raise RuntimeError(f"cuvs::cluster::gmm::fit: {session.err.value.decode()}")
        _state["peak"] = held + peak.value

    def min_ms(max_iter: int, reps: int) -> float:
        best = float("inf")
        for _ in range(reps):
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            fit(max_iter)
            torch.cuda.synchronize(dev)
            best = min(best, (time.perf_counter() - t0) * 1e3)
        return best

    info = {"algorithm": f"cuvs::cluster::gmm::fit ({'FULL' if full else 'DIAG'}, warm start, tol=0)", "precision": "fp32",
            "cuvs_version": importlib.metadata.version("libcuvs-cu13")}
    overhead_reps = int(opts.get("overhead_reps", 3))
    if overhead_reps > 0:  # untimed: what one fit spends outside its EM loop (module docstring)
        fit(1)  # first fit creates cuBLAS state (~0.2 s): keep it out of the differences
        f0, f1, f2 = (min_ms(t, overhead_reps) for t in (0, 1, 2))
        info.update(fit0_ms=f0, fit1_ms=f1, fit2_ms=f2, em_iter_ms=f2 - f1,
                    outside_loop_ms=2 * f1 - f2, extra_estep_ms=f0 + f2 - 2 * f1)

    def run() -> Fit:
        fit(n_iter)
        facts = dict(info, lower_bound=lb.value, converged=bool(conv.value), rmm_peak_bytes=peak.value,
                     held_bytes=held)
        if full:
            return Fit(weights=w.clone(), means=m.clone(), variances=None, n_iter=it.value, info=facts,
                       covariances=v.clone())
        return Fit(weights=w.clone(), means=m.clone(), variances=v.clone(), n_iter=it.value, info=facts)

    return run


def prepare_e2e(X_host, X_device, K, opts):
    """``cuvs::cluster::gmm::fit`` (DIAG, or FULL for ``opts["covariance_type"] == "full"``: (K, d, d)
    covariance, precision and factor buffers) with ``warm_start=false``: cuVS's own default initialization
    (k-means seeded by k-means++, ``n_init = 1``) and EM to ``tol`` within ``max_iter``, plus its
    labels E-step. cuVS reads device pointers only, so the host input is copied to the device first
    (``torch.from_numpy(X).cuda()``, timed as ``transfer``); the fit itself is one library call, its
    init and EM not separable from outside (unsplit)."""
    import torch

    if X_device is None:
        raise ValueError("cuVS needs a CUDA device")
    N, d = X_device.shape
    if K > MAX_COMPONENTS or N > MAX_ROWS:
        raise ValueError(f"cuVS takes at most {MAX_COMPONENTS} components and {MAX_ROWS} rows, got K={K}, N={N}")
    from arms import fitted

    shim = _load_shim()
    session = _Session(shim)
    dev = X_device.device
    covariance_type = opts.get("covariance_type", "diag")
    full = covariance_type == "full"
    w = torch.empty(K, dtype=torch.float32, device=dev)
    m = torch.empty(K, d, dtype=torch.float32, device=dev)
    v, pchol, prec = (torch.empty(K, d, *((d,) if full else ()), dtype=torch.float32, device=dev) for _ in range(3))
    labels = torch.empty(N, dtype=torch.int32, device=dev)
    lb, it, conv, peak = ctypes.c_float(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int64()
    info = {"algorithm": f"cuvs::cluster::gmm::fit ({'FULL' if full else 'DIAG'}, own init, n_init=1)",
            "precision": "fp32", "cuvs_version": importlib.metadata.version("libcuvs-cu13")}

    def fit(X):
        stream = torch.cuda.current_stream(dev).cuda_stream
        rc = shim.turbo_cuvs_gmm_fit(
            session.ptr, stream, X.data_ptr(), w.data_ptr(), m.data_ptr(), v.data_ptr(), pchol.data_ptr(),
            prec.data_ptr(), labels.data_ptr(), N, d, K, int(full), int(opts["max_iter"]), float(opts["reg_covar"]),
            float(opts["tol"]), 0, ctypes.byref(lb), ctypes.byref(it), ctypes.byref(conv), ctypes.byref(peak),
            session.err, len(session.err))
        if rc:
            raise RuntimeError(f"cuvs::cluster::gmm::fit: {session.err.value.decode()}")
        return fitted(covariance_type, w.clone(), m.clone(), v.clone(), it.value,
                      dict(info, lower_bound=lb.value, converged=bool(conv.value)))

    def from_host():
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        X = torch.from_numpy(X_host).to(dev)
        torch.cuda.synchronize(dev)
        transfer = time.perf_counter() - t0
        return fit(X), {"transfer": transfer}

    return {"host": from_host, "device": lambda: (fit(X_device), {})}
