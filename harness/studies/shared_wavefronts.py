"""Shared-memory wavefronts of a kernel's row-tile loop, predicted without a GPU from its compiled TTGIR.

The L1's shared-memory wavefronts are the busiest unit of every profiled kernel (results/h200/counters.md). This
study finds each ``ttg.local_alloc`` (a store of a register tensor) and ``ttg.local_load`` (a load into registers)
inside the first ``scf.for`` of the sm_90 compile, takes warp 0's addresses from the register layout (Gluon's
linear layout of it) and the swizzled shared layout, groups registers into the vectors the lowering emits
(consecutive registers at consecutive addresses, at most 16 bytes), and counts wavefronts the way the shared
memory serves them: a 16-byte access a quarter warp at a time, an 8-byte one a half warp at a time, narrower ones
the whole warp; in each, the most distinct 4-byte words any one of the 32 banks must deliver. Every warp of the
program is taken to do what warp 0 does. On the fp64 one pass at 20M_32_32 (207e226's layouts) it predicts
920M load and 360M store wavefronts where Nsight Compute counted 962M and 383M
(harness/tests/studies/test_shared_wavefronts.py). Layouts other than Triton's swizzled shared ones (the NVMMA
layouts of wgmma operands and TMA) are left out; Gluon's gl.bank_conflicts covers those.

    python -m harness.studies.shared_wavefronts --K 32 --d 32 --algorithm one_pass --precision fp64 \
        [--out results/h200/shared_wavefronts.csv]

With --out, each kernel's row tile goes into that CSV too (a row per kernel, K, d, precision and tile, replaced
when compiled again), with the Triton version and commit that compiled it: figures.table_fp64 turns it into the
shared-memory floor of each fp64 shape.
"""
from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import triton

from harness.env import git_commit
from harness.studies.resources import compile_triton_kernel, refuse_interpreter, shape_arguments, triton_kernels
from turbo_gmm.dispatch import launch_config
from turbo_gmm.launch import LaunchConfig, parse_config
from turbo_gmm.diag.lift import pow2_at_least_16

BANKS, BANK_BYTES, MAX_VECTOR_BYTES = 32, 4, 16
ELEMENT_BYTES = {"f64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2}
SHARED = re.compile(r"#ttg\.swizzled_shared<\{vec = (\d+), perPhase = (\d+), maxPhase = (\d+), order = \[(\d), (\d)\]\}>")
STORE = re.compile(r"ttg\.local_alloc %\S+ : \(tensor<(\d+)x(\d+)x(\w+), ([^>]+>?)>\) -> !ttg\.memdesc<\d+x\d+x\w+, (#\w+)")
LOAD = re.compile(r"ttg\.local_load %\S+(?: token %\S+)? : !ttg\.memdesc<(\d+)x(\d+)x(\w+), (#\w+)[^>]*> -> "
                  r"tensor<\d+x\d+x\w+, (#\w+|#ttg\.dot_op<\{[^}]*\}>)>")


def layouts(ttgir: str) -> dict[str, str]:
    """The TTGIR's layout aliases (#blocked, #mma, #shared, ...) -> their definitions."""
    return dict(re.findall(r"^(#\w+) = (#ttg\.\w+<\{.*?\}>)\s*$", ttgir, re.M))


def gluon_layout(encoding: str, aliases: dict[str, str], shape: list[int]) -> str:
    """Python source of the Gluon layout a TTGIR register encoding names."""
    enc = aliases.get(encoding, encoding)
    if m := re.fullmatch(r"#ttg\.blocked<\{sizePerThread = (\[.*?\]), threadsPerWarp = (\[.*?\]), "
                         r"warpsPerCTA = (\[.*?\]), order = (\[.*?\])\}>", enc):
        return "gl.BlockedLayout(%s, %s, %s, %s)" % m.groups()
    if m := re.fullmatch(r"#ttg\.nvidia_mma<\{versionMajor = (\d+), versionMinor = (\d+), warpsPerCTA = (\[.*?\]), "
                         r"instrShape = (\[.*?\])\}>", enc):
        return "gl.NVMMADistributedLayout(version=[%s, %s], warps_per_cta=%s, instr_shape=%s)" % m.groups()
    if m := re.fullmatch(r"#ttg\.linear<\{register = (\[.*?\]), lane = (\[.*?\]), warp = (\[.*?\]), block = \[\]\}>", enc):
        return "gl.DistributedLinearLayout(%s, %s, %s, [], %s)" % (*m.groups(), shape)
    if m := re.fullmatch(r"#ttg\.dot_op<\{opIdx = (\d), parent = (#\w+), kWidth = (\d+)\}>", enc):
        parent = gluon_layout(m.group(2), aliases, shape)
        return f"gl.DotOperandLayout({m.group(1)}, {parent}, {m.group(3)})"
    raise ValueError(f"no Gluon layout for {enc}")


PROBE = '''
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def probe(x):
{prints}


triton.compile(GluonASTSource(probe, {{"x": "*fp32"}}, constexprs={{}}), target=GPUTarget("cuda", 90, 32),
               options={{"num_warps": {warps}}})
'''


def linear_layouts(requests: list[tuple[str, list[int]]], warps: int) -> list[dict]:
    """Gluon's linear layout (register, lane and warp bases) of each (layout source, shape), from one probe
    compile that prints them (gl.to_linear_layout is evaluated at compile time)."""
    prints = "\n".join(f"    gl.static_print(gl.to_linear_layout({src}, {shape}))" for src, shape in requests)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROBE.format(prints=prints, warps=warps))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    try:  # a fresh compile each time: a cached one prints nothing
        p = subprocess.run([sys.executable, f.name], capture_output=True, text=True, timeout=300,
                           env={**env, "TRITON_ALWAYS_COMPILE": "1"})
    finally:
        os.unlink(f.name)
    found = re.findall(r"reg_bases=(\[.*?\]), lane_bases=(\[.*?\]), warp_bases=(\[.*?\]), block_bases", p.stdout)
    if len(found) != len(requests):
        raise RuntimeError(f"layout probe printed {len(found)} of {len(requests)} layouts:\n{p.stderr[-2000:]}")
    bases = [[list(map(list, ast.literal_eval(b))) for b in f] for f in found]  # lists, or tuples for a linear layout
    return [{"reg": r, "lane": lane, "warp": w} for r, lane, w in bases]


def _coordinate(bases: list[list[int]], index: int) -> list[int]:
    out = [0, 0]
    for bit, base in enumerate(bases):
        if index >> bit & 1:
            out = [a ^ b for a, b in zip(out, base)]
    return out


def swizzled_offset(row: int, col: int, shape: list[int], vec: int, per_phase: int, max_phase: int,
                    order: list[int]) -> int:
    """Element offset of (row, col) in Triton's swizzled shared layout (order[0]: the contiguous dimension)."""
    if order == [0, 1]:
        row, col, shape = col, row, shape[::-1]
    phase = (row // per_phase) % max_phase
    return row * shape[1] + ((col // vec) ^ phase) * vec + col % vec


def wavefronts(layout: dict, shape: list[int], element_bytes: int, shared: tuple) -> dict:
    """Warp 0's wavefronts (and the fewest its bytes could take) moving a register tensor of ``layout`` to or
    from a tile of ``shared`` = (vec, per_phase, max_phase, order)."""
    registers = 1 << len(layout["reg"])

    def offset(register: int, lane: int) -> int:
        r, c = (a ^ b for a, b in zip(_coordinate(layout["reg"], register), _coordinate(layout["lane"], lane)))
        return swizzled_offset(r, c, shape, *shared)

    vector = 1  # registers a thread moves in one instruction: consecutive elements at consecutive addresses
    while (2 * vector * element_bytes <= MAX_VECTOR_BYTES and 2 * vector <= registers
           and all(offset(i, lane) == offset(0, lane) + i for lane in range(32) for i in range(2 * vector))):
        vector *= 2
    width = vector * element_bytes
    lanes_per_pass = 32 if width <= BANK_BYTES else 128 // width
    total = fewest = 0
    for first in range(0, registers, vector):
        addresses = [offset(first, lane) * element_bytes for lane in range(32)]
        for start in range(0, 32, lanes_per_pass):
            words = {w for a in addresses[start:start + lanes_per_pass] for w in range(a // 4, (a + width) // 4)}
            per_bank: dict[int, int] = {}
            for w in words:
                per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
            total += max(per_bank.values())
            fewest += -(-len(words) // BANKS)
    return {"wavefronts": total, "fewest": fewest, "bytes_per_access": width}


def loop_accesses(ttgir: str) -> list[dict]:
    """The local_alloc (store) and local_load (load) of the first loop's body, in order."""
    start = ttgir.index("scf.for")
    body = ttgir[start:ttgir.index("scf.yield", start)]
    out = []
    for line in body.splitlines():
        if m := STORE.search(line):
            rows, cols, dtype, register, shared = m.groups()
            out.append({"op": "store", "shape": [int(rows), int(cols)], "dtype": dtype, "register": register,
                        "shared": shared})
        elif m := LOAD.search(line):
            rows, cols, dtype, shared, register = m.groups()
            out.append({"op": "load", "shape": [int(rows), int(cols)], "dtype": dtype, "register": register,
                        "shared": shared})
    return out


def analyze(ttgir: str, warps: int) -> dict:
    """Per access of the loop and per row tile (all ``warps``): wavefronts and the fewest possible."""
    aliases = layouts(ttgir)
    accesses = [a for a in loop_accesses(ttgir) if SHARED.fullmatch(aliases.get(a["shared"], ""))]
    found = linear_layouts([(gluon_layout(a["register"], aliases, a["shape"]), a["shape"]) for a in accesses], warps)
    tile = {"load": [0, 0], "store": [0, 0]}
    for a, layout in zip(accesses, found):
        v, p, m, o0, o1 = map(int, SHARED.fullmatch(aliases[a["shared"]]).groups())
        a["swizzle"] = {"vec": v, "per_phase": p, "max_phase": m, "order": [o0, o1]}
        a.update(wavefronts(layout, a["shape"], ELEMENT_BYTES[a["dtype"]], (v, p, m, [o0, o1])))
        tile[a["op"]][0] += a["wavefronts"] * warps
        tile[a["op"]][1] += a["fewest"] * warps
    return {"accesses": accesses, "tile": {op: {"wavefronts": w, "fewest": f} for op, (w, f) in tile.items()}}


def report(K: int, d: int, algorithm: str, precision: str = "tf32x3", cfg: LaunchConfig | None = None,
           w_strides: dict | None = None, meta: dict | None = None) -> list[dict]:
    """One row per Triton kernel of ``algorithm`` at (K, d): its loop's shared-memory accesses and wavefronts a
    row tile. ``w_strides`` replaces W's strides as a launch passes them (resources.weight_strides), ``meta``
    entries of the launch meta (e.g. GATHER)."""
    refuse_interpreter()
    cfg = cfg or launch_config(algorithm, K, d, precision)
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    rows = []
    for name, (fn, sig, launch) in triton_kernels(k_pad, d_pad, cfg, precision).items():
        if not name.startswith(algorithm):
            continue
        launch = {**launch, **(meta or {})}
        compiled = compile_triton_kernel(fn, {**sig, **(w_strides or {})}, launch)
        found = analyze(compiled.asm["ttgir"], launch["num_warps"])
        rows.append({"kernel": name, "K": K, "d": d, "precision": precision, "BLOCK_N": launch["BLOCK_N"],
                     "num_warps": launch["num_warps"], **found})
    return rows


CSV_COLUMNS = ["kernel", "K", "d", "precision", "BLOCK_N", "num_warps", "load_wavefronts", "load_fewest",
               "store_wavefronts", "store_fewest", "triton", "git_commit", "date"]
CSV_KEY = ("kernel", "K", "d", "precision", "BLOCK_N", "num_warps")


def write_rows(rows: list[dict], out: Path) -> Path:
    """Merge :func:`report`'s rows into the CSV ``out`` (a row per kernel, K, d, precision and tile), provenance
    added; rows of other keys are kept."""
    new = [{"kernel": r["kernel"], "K": r["K"], "d": r["d"], "precision": r["precision"], "BLOCK_N": r["BLOCK_N"],
            "num_warps": r["num_warps"], "load_wavefronts": r["tile"]["load"]["wavefronts"],
            "load_fewest": r["tile"]["load"]["fewest"], "store_wavefronts": r["tile"]["store"]["wavefronts"],
            "store_fewest": r["tile"]["store"]["fewest"], "triton": triton.__version__, "git_commit": git_commit(),
            "date": time.strftime("%Y-%m-%d")} for r in rows]
    keys = {tuple(str(r[k]) for k in CSV_KEY) for r in new}
    kept = []
    if out.exists():
        with open(out, newline="") as f:
            kept = [r for r in csv.DictReader(f) if tuple(r[k] for k in CSV_KEY) not in keys]
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, CSV_COLUMNS)
        w.writeheader()
        w.writerows(sorted(kept + new, key=lambda r: (r["precision"], r["kernel"], int(r["K"]), int(r["d"]))))
    return out


def main(argv=None) -> None:
    p = shape_arguments(__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None, help="LaunchConfig as in harness.studies.measure")
    p.add_argument("--w-storage", choices=("launch", "rows"), default="launch",
                   help="W as a launch stores it (turbo_gmm.diag.lift.weights_buffer) or row-major at every precision "
                        "(components contiguous: fp64's storage before 2026-12-05)")
    p.add_argument("--x-columns", choices=("launch", "twice"), default="launch",
                   help="the lifted tile as a launch forms it (turbo_gmm.diag.lift.gathers_rows) or each half loading its own "
                        "copy of X's columns (fp64's form before 2026-12-05)")
    p.add_argument("--out", type=Path, default=None, help="also merge each kernel's tile into this CSV")
    a = p.parse_args(argv)
    w_strides = {"stride_wl": "i32", "stride_wk": 1} if a.w_storage == "rows" else None
    meta = {"GATHER": False} if a.x_columns == "twice" else None
    cfg = parse_config(a.config) if a.config else None
    rows = report(a.K, a.d, a.algorithm, a.precision, cfg, w_strides, meta)
    for row in rows:
        print(json.dumps(row), flush=True)
    if a.out:
        write_rows(rows, a.out)


if __name__ == "__main__":
    main()
