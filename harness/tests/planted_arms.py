"""Arms planted for the harness's own tests: one correct float64 EM and several failures.

The behaviour is chosen by ``opts["behaviour"]``; the arm YAMLs are in
``harness/tests/conf/arm`` (added to Hydra's search path by the tests).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from turbo_gmm.records import Fit
from turbo_gmm.diag import reference

MEMORY = "torch"  # on a CPU the worker falls back to rss: the tests check both


def available():
    return os.environ.get("PLANTED_UNAVAILABLE") or None


def prepare(X, init, n_iter, opts):
    behaviour = opts.get("behaviour", "em")
    Xh = X.double().cpu().numpy()

    def em():
        (w, m, v), _ = reference.em(Xh, init.weights, init.means, init.variances, n_iter, opts["reg_covar"])
        return Fit(w, m, v, n_iter=n_iter, info={"algorithm": "reference_em", "precision": "fp64"})

    def crash():
        raise RuntimeError("planted crash: the arm gave up")

    def oom():
        raise MemoryError("planted: cannot allocate the responsibilities")

    def sleep():
        # a grandchild in the same process group: the runner must kill it too
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.environ["PLANTED_PID_FILE"], "w") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
        time.sleep(600)

    def early():
        fit = em()
        fit.n_iter = 3
        return fit

    def nan_variance():
        fit = em()
        fit.variances[0, 0] = float("nan")
        return fit

    def caches():  # the compilation caches the worker pointed the libraries at (harness/caches.py)
        import triton

        fit = em()
        fit.info.update(TRITON_CACHE_DIR=os.environ.get("TRITON_CACHE_DIR"), triton_cache_dir=triton.knobs.cache.dir,
                        JAX_COMPILATION_CACHE_DIR=os.environ.get("JAX_COMPILATION_CACHE_DIR"))
        return fit

    def sigkill():  # what the kernel's OOM killer does to a process that outgrows the host's memory
        os.kill(os.getpid(), 9)

    def out_of_resources():
        raise type("OutOfResources", (Exception,), {})("out of resource: shared memory, Required: 300000")

    return {"em": em, "crash": crash, "oom": oom, "sleep": sleep, "early": early,
            "nan_variance": nan_variance, "out_of_resources": out_of_resources, "caches": caches,
            "sigkill": sigkill}[behaviour]
