"""A k-means arm planted for the harness's own tests: an honest Lloyd, or a doctored one.

``opts["behaviour"]``: "lloyd" runs the float64 Lloyd of gate/kmeans.py from the seeds (valid by construction) and
the same from them as its own fit; "doctored" returns those centers with one coordinate of the first moved by
``opts["shift"]`` (the gate must reject it), and its own fit is killed by SIGKILL, as the kernel's OOM killer kills
a process, after the Lloyd measurement was filed (the row must keep it). YAMLs: harness/tests/conf/arm/planted_kmeans_*.
"""
from __future__ import annotations

import os
import signal

from arms.kmeans import KMeansFit
from gate.kmeans import lloyd_reference

MEMORY = "rss"


def available():
    return None


def prepare_lloyd(X, X_host, seeds, n_iter, opts):
    def run() -> KMeansFit:
        ref = lloyd_reference(X, seeds, n_iter)
        centers = ref.centers.clone()
        if opts.get("behaviour") == "doctored":
            centers[0, 0] += float(opts.get("shift", 0.5))
        return KMeansFit(centers, ref.n_iter, {"planted": opts.get("behaviour")})

    return run


def prepare_fit(X, X_host, K, opts):
    seeds = X[:K].clone()

    def run() -> KMeansFit:
        if opts.get("behaviour") == "doctored":
            os.kill(os.getpid(), signal.SIGKILL)
        ref = lloyd_reference(X, seeds, 300)
        return KMeansFit(ref.centers, ref.n_iter, {"planted": "own fit: Lloyd from the first K rows"})

    return run
