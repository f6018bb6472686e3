"""Where an arm's EM iteration goes on the GPU: device time per kernel, from torch.profiler.

    python -m harness.kernel_profile flash_gmm turbo_gmm --shape 1M_512_32 [--option flash_gmm.autotune=published]
        [--n-iter 10] [--out FILE.csv]

Each arm is prepared as the harness prepares it (same data, shared init, options
from conf/arm/<arm>.yaml), its fit runs once untimed (JIT, autotuning), then once
under the profiler; every CUDA kernel's time is summed by name and divided by the
iteration count. This answers which pass an iteration's time goes to in each
fused kernel (kernels/README.md, "Why Algorithm 3 lost to Flash-GMM at K >= 512");
the latency numbers of record come from the harness.
"""
from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # as in harness.worker: before any library import

import argparse  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import arms  # noqa: E402
from kernels.datasets import make_dataset, shared_init  # noqa: E402
from harness.results import write_diagnostic_csv  # noqa: E402

CONF = Path(__file__).resolve().parents[1] / "conf"
REG_COVAR = OmegaConf.load(CONF / "config.yaml").reg_covar


def shape_sizes(name: str) -> tuple[int, int, int]:
    """(N, K, d) of a shape in conf/shape."""
    path = CONF / "shape" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (CONF / "shape").glob("*.yaml"))
        raise ValueError(f"unknown shape {name!r}; known: {', '.join(known)}")
    s = OmegaConf.load(path)
    return int(s["N"]), int(s["K"]), int(s["d"])


def arm_options(arm: str, overrides: list[str]) -> tuple[str, dict]:
    """(module, options) of an arm as the worker passes them, with ``arm.key=value`` overrides applied."""
    path = CONF / "arm" / f"{arm}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (CONF / "arm").glob("*.yaml"))
        raise ValueError(f"unknown arm {arm!r}; known: {', '.join(known)}")
    spec = OmegaConf.to_container(OmegaConf.load(path))
    opts = dict(spec.get("options") or {}, reg_covar=REG_COVAR, numerics=spec["numerics"])
    for item in overrides:
        target, _, value = item.partition("=")
        name, _, key = target.partition(".")
        if not key or not _:
            raise ValueError(f"--option takes arm.key=value, got {item!r}")
        if name == arm:
            opts[key] = OmegaConf.create(f"v: {value}").v  # YAML scalar: true, 3, 0.5, text
    return spec["module"], opts


def kernel_times(events, n_iter: int) -> dict[str, tuple[float, int]]:
    """{kernel name: (ms per iteration, launches per iteration)} from profiler events,
    device-side kernels only, largest first."""
    ms, calls = defaultdict(float), defaultdict(int)
    for e in events:
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            ms[e.name] += e.device_time / 1e3  # microseconds
            calls[e.name] += 1
    return {k: (ms[k] / n_iter, calls[k] / n_iter) for k in sorted(ms, key=ms.get, reverse=True)}


def profile_arm(arm: str, shape: str, n_iter: int, overrides: list[str]) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    N, K, d = shape_sizes(shape)
    module, opts = arm_options(arm, overrides)
    X = make_dataset(N, K, d, 0, "cuda").X
    run = arms.load(module).prepare(X, shared_init(X, K, 0), n_iter, opts)
    run()  # JIT and autotuning stay out of the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    times = kernel_times(prof.events(), n_iter)
    total = sum(t for t, _ in times.values())
    return [{"arm": arm, "shape": shape, "kernel": k[:120], "ms_per_iter": round(t, 4),
             "launches_per_iter": round(c, 2), "share": round(t / total, 4) if total else 0.0}
            for k, (t, c) in times.items()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arms", nargs="+")
    p.add_argument("--shape", action="append", required=True)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--option", action="append", default=[], help="arm.key=value (repeatable)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (it profiles device kernels)")
    rows = []
    for shape in a.shape:
        for arm in a.arms:
            try:
                got = profile_arm(arm, shape, a.n_iter, a.option)
            except Exception as e:  # one arm failing (e.g. OutOfResources) must not lose the others
                got = [{"arm": arm, "shape": shape, "kernel": f"error: {type(e).__name__}: {str(e)[:200]}"}]
            for r in got:
                print(r, flush=True)
            rows += got
            torch.cuda.empty_cache()
    if a.out:
        write_diagnostic_csv(a.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
