"""Where an arm's EM iteration goes on the GPU: device time per kernel, from torch.profiler.

    python -m harness.studies.kernel_profile flash_gmm turbo_gmm --shape 1M_512_32 \
        [--option flash_gmm.autotune=published] [--n-iter 10] [--out FILE.csv]

Each arm is prepared as the harness prepares it: its cell is composed by Hydra from
conf/ (``arm=<arm> shape=<shape>``, an ``--option arm.key=value`` becoming the override
``arm.options.key=value`` of that arm's cells only), and the data, shared init and options
follow from the composed config as in harness.worker. Its fit runs once untimed (JIT,
autotuning), then once under the profiler; every CUDA kernel's time is summed by name and
divided by the iteration count. This answers which pass an iteration's time goes to in
each fused kernel; the latency numbers of record come from the harness.
"""
from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # as in harness.worker: before any library import

import argparse  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

import arms  # noqa: E402
from harness.results import write_diagnostic_csv  # noqa: E402
from turbo_gmm.datasets import make_dataset, shared_init  # noqa: E402

CONF = Path(__file__).resolve().parents[2] / "conf"


def cell_config(arm: str, shape: str, options: list[str]) -> DictConfig:
    """The composed config of the cell (arm, shape), with the ``arm.key=value`` options meant for
    this arm as Hydra overrides of ``arm.options``. An unknown arm, shape or option key is
    Hydra's error, which names it and lists what exists."""
    overrides = [f"arm={arm}", f"shape={shape}"]
    for item in options:
        target, eq, value = item.partition("=")
        name, dot, key = target.partition(".")
        if not (eq and dot and name and key):
            raise ValueError(f"--option takes arm.key=value, got {item!r}")
        if name == arm:
            overrides.append(f"arm.options.{key}={value}")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides)


def arm_options(cfg: DictConfig) -> tuple[str, dict]:
    """(module, options) of the cell's arm as harness.worker passes them to ``prepare``."""
    arm = OmegaConf.to_container(cfg.arm, resolve=True)
    return arm["module"], dict(arm.get("options") or {}, reg_covar=cfg.reg_covar, numerics=arm["numerics"])


def kernel_times(events, n_iter: int) -> dict[str, tuple[float, int]]:
    """{kernel name: (ms per iteration, launches per iteration)} from profiler events,
    device-side kernels only, largest first."""
    ms, calls = defaultdict(float), defaultdict(int)
    for e in events:
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            ms[e.name] += e.device_time / 1e3  # microseconds
            calls[e.name] += 1
    return {k: (ms[k] / n_iter, calls[k] / n_iter) for k in sorted(ms, key=ms.get, reverse=True)}


def profile_arm(cfg: DictConfig, n_iter: int) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    N, K, d = cfg.shape.N, cfg.shape.K, cfg.shape.d
    module, opts = arm_options(cfg)
    X = make_dataset(N, K, d, cfg.seed, "cuda").X
    run = arms.load(module).prepare(X, shared_init(X, K, cfg.seed), n_iter, opts)
    run()  # JIT and autotuning stay out of the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    times = kernel_times(prof.events(), n_iter)
    total = sum(t for t, _ in times.values())
    return [{"arm": cfg.arm.name, "shape": cfg.shape.name, "kernel": k[:120], "ms_per_iter": round(t, 4),
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
    cells = [(arm, shape, cell_config(arm, shape, a.option)) for shape in a.shape for arm in a.arms]  # bad names fail here
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (it profiles device kernels)")
    rows = []
    for arm, shape, cfg in cells:
        try:
            got = profile_arm(cfg, a.n_iter)
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
