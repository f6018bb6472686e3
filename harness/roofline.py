"""The floor an EM iteration is measured against: its products on the tensor cores (or CUDA cores) at the
precision it ran, or reading X from HBM, the longer, at a device's probed rates (env.json, harness.env).

One definition for table1.csv's ``roofline_fraction`` (harness.results), Turbo-GMM's summary
(figures/turbo_summary.py), the full-covariance table (figures/table_full.py, its own FLOP count) and the
studies: issue 23's roofline is :func:`diagonal_ms` at tf32x3. Each precision is charged the products it
issues per useful product (tf32x3: three TF32 ones) at the probe that rates them; X is float32 in every
benchmark (turbo_gmm.datasets) and read once for the floor, whatever an algorithm's passes cost.
"""
from __future__ import annotations

# precision -> (products issued per useful product, the env.json probe that rates them)
CHARGES = {"tf32x3": (3, "tf32_tflops"), "tf32": (1, "tf32_tflops"), "bf16": (1, "bf16_tflops"),
           "fp64": (1, "fp64_tflops"), "ieee": (1, "fp32_tflops"), "fp32": (1, "fp32_tflops")}
# Issue 23's H200 figures (its TF32 rate and HBM read), for a device whose env.json has no probes
ISSUE_23_RATES = {"tf32_tflops": 396.0, "hbm_read_gb_per_s": 4300.0}
X_ITEMSIZE = 4


def compute_ms(flop: float, precision: str, rates: dict) -> float | None:
    """ms for ``flop`` useful FLOP at ``precision``'s charge and probed rate; None where either is unknown."""
    charge, probe = CHARGES.get(precision, (None, None))
    if charge is None or not rates.get(probe):
        return None
    return 1e3 * charge * flop / (rates[probe] * 1e12)


def read_ms(nbytes: float, rates: dict) -> float | None:
    """ms to read ``nbytes`` from HBM at the probed read bandwidth; None without the probe."""
    rate = rates.get("hbm_read_gb_per_s")
    return 1e3 * nbytes / (rate * 1e9) if rate else None


def bound_ms(flop: float, nbytes: float, precision: str, rates: dict) -> tuple[float, str] | None:
    """(the floor in ms, what sets it: "compute" or "HBM"), the longer of :func:`compute_ms` and :func:`read_ms`;
    None where either rate is unknown."""
    compute, read = compute_ms(flop, precision, rates), read_ms(nbytes, rates)
    if compute is None or read is None:
        return None
    return (compute, "compute") if compute >= read else (read, "HBM")


def diagonal_ms(N: int, K: int, d: int, precision: str, rates: dict) -> float | None:
    """The floor of one diagonal (or spherical) EM iteration: 8 N K d useful FLOP (the score's and the statistics'
    products, a multiply-add = 2) or one read of X, the longer."""
    floor = bound_ms(8.0 * N * K * d, N * d * X_ITEMSIZE, precision, rates)
    return floor[0] if floor else None
