"""Which algorithm runs where: Algorithm 2 while the component axis fits on chip.

The rule is measured, not derived (paper §5.2): the single sweep's loop-carried
state is Theta(K_pad * d_pad) and register pressure binds before shared-memory
capacity does, so the boundary is a property of the device and the compiler.
"""
from __future__ import annotations

from kernels.launch import LaunchConfig
from kernels.lift import pow2_at_least_16

ALGORITHMS = ("one_pass", "two_pass")


def a100_rule(k_pad: int, d_pad: int) -> bool:
    """The paper's A100 rule: one pass iff K_pad <= 128 and K_pad * d_pad <= 4096."""
    return k_pad <= 128 and k_pad * d_pad <= 4096


def choose_algorithm(K: int, d: int, device_name: str | None = None) -> str:
    """'one_pass' or 'two_pass' for K components in d dimensions on this device."""
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    return "one_pass" if a100_rule(k_pad, d_pad) else "two_pass"


def launch_config(algorithm: str, K: int, d: int) -> LaunchConfig:
    """Tile shape for a (K, d), measured on the H200 (kernels/measure.py, 2026-11-30).

    tf32x3 splits every dot operand in registers, so the kernels are register
    bound: fewer rows per tile as the lifted width 2*d_pad or K_pad grows, and no
    software pipelining at d_pad = 128 where shared memory runs out.
    """
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    if algorithm == "one_pass":
        if d_pad >= 128:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=1)
        if k_pad >= 128 or d_pad >= 64:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=2)
        return LaunchConfig(block_n=64, num_warps=4, num_stages=3)
    if d_pad >= 128:
        return LaunchConfig(block_n=32, block_k=16, num_warps=4, num_stages=1)
    return LaunchConfig(block_n=64, block_k=64, num_warps=4, num_stages=2)
