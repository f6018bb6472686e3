"""What the compiler makes of a kernel configuration, without a GPU.

Compiles Algorithm 2's and Algorithm 3's kernels (and the Gluon warp-specialized one pass and pass 2 where
the launch config takes them), or with --covariance full those of kernels/full, for sm_90 (Hopper)
with Triton's own ptxas and reports, per kernel: registers per thread, local-memory stack (spills), shared
memory per program, how many programs fit on one multiprocessor by each of those limits,
and the global atomics and memory barriers in the SASS; for the warp-specialized kernels also why ptxas
serialized their wgmma, if it did (``wgmma_serialized``: its -v advice, which Triton's compile does not
print). The register and shared-memory budget decides how many warps hide the exponentials and loads behind
the tensor cores.

    python -m harness.studies.resources --K 512 --d 32 --algorithm two_pass \\
        --config block_n=64,block_k=64,num_warps=4,num_stages=2,normalizer_block_n=256,normalizer_warps=8
    python -m harness.studies.resources --covariance full --K 128 --d 32 --algorithm two_pass \\
        --moments component --config block_n=64,num_stages=2
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from turbo_gmm.dispatch import launch_config
from turbo_gmm.diag.em import FLOAT32_PRECISIONS, PRECISIONS
from turbo_gmm.dispatch import full_launch_config, parse_full_config
from turbo_gmm.launch import FullConfig
from turbo_gmm.full.parameters import PAIR_BLOCK, padded_sizes
from turbo_gmm.launch import LaunchConfig, parse_config
from turbo_gmm.diag import one_pass, two_pass
from turbo_gmm.diag.lift import FP64, SENTINEL, pow2_at_least_16, weights_buffer

SM90 = {"registers": 65536, "shared_bytes": 233472, "reserved_shared_per_program": 1024, "max_warps": 64,
        "max_programs": 32}
PTRS32, PTRS64 = "*fp32", "*fp64"
I32 = "i32"


def weight_strides(k_pad: int, d_pad: int, precision: str) -> dict:
    """W's strides as a launch passes them (turbo_gmm.diag.lift.weights_buffer): the one equal to 1 a constant, as Triton
    specializes it (which decides the layout of W's loads), the other an i32 divisible by 16."""
    strides = weights_buffer(k_pad, d_pad, precision, "meta").stride()
    return {name: 1 if stride == 1 else I32 for name, stride in zip(("stride_wl", "stride_wk"), strides)}


# integer arguments a launch at the Table 1 shapes passes divisible by 16 (N, d, the row stride, W's non-unit stride):
# Triton specializes them so, and the vector width of the loads follows (LDG.E.128 against LDG.E)
DIVISIBLE_INTS = ("N", "d", "stride_x", "stride_wl", "stride_wk")


def compile_source(fn, sig: dict, constexprs: dict):
    """An ASTSource of ``fn`` as a launch specializes it: the constants in ``sig`` (W's unit stride) moved to the
    constexprs, pointers and DIVISIBLE_INTS marked divisible by 16."""
    consts = {k: v for k, v in sig.items() if not isinstance(v, str)}
    sig = {**{k: ("constexpr" if k in consts else v) for k, v in sig.items()}, **{k: "constexpr" for k in constexprs}}
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k, v in sig.items()
             if v.startswith("*") or (k in DIVISIBLE_INTS and v == I32)}
    return ASTSource(fn, sig, constexprs={**consts, **constexprs}, attrs=attrs)


def compile_triton_kernel(fn, sig: dict, meta: dict):
    """The sm_90 compile of one of :func:`triton_kernels` with its launch meta, unweighted (the kernels compiled
    as without sample weights)."""
    constexprs = {k: v for k, v in meta.items() if k.isupper()} | _weights_typed(False)[1]
    return triton.compile(compile_source(fn, sig, constexprs), target=GPUTarget("cuda", 90, 32),
                          options={k: meta[k] for k in ("num_warps", "num_stages", "maxnreg") if k in meta})


def shape_arguments(description: str) -> argparse.ArgumentParser:
    """A parser with the shape and precision of the kernels to compile (--K, --d, --algorithm, --precision)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--K", type=int, required=True)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--algorithm", choices=("one_pass", "two_pass"), required=True)
    p.add_argument("--precision", default="tf32x3", choices=PRECISIONS)
    return p


def _weights_typed(weighted: bool) -> tuple[dict, dict]:
    """(signature, constexprs) of a kernel's sample-weight arguments, as turbo_gmm.launch.weight_arguments passes
    them: the weights a float32 pointer and WEIGHTED, or sw None and WEIGHTED False (compiled as without)."""
    return ({"sw": PTRS32}, {"WEIGHTED": True}) if weighted else ({}, {"sw": None, "WEIGHTED": False})


def triton_kernels(k_pad: int, d_pad: int, cfg: LaunchConfig, precision: str) -> dict:
    """kernel name -> (jit function, pointer and integer signature, launch meta as the launch uses it). X is
    float32; the lifted parameters, the center and L float64 under fp64 (turbo_gmm.diag.lift.lift_dtype)."""
    lp = PTRS64 if precision == FP64 else PTRS32
    w = weight_strides(k_pad, d_pad, precision)
    one = {"X": PTRS32, "center": lp, "W": lp, "b": lp, "n_out": PTRS64, "su_out": PTRS64,
           "ll_out": PTRS64, "N": I32, "d": I32, "stride_x": I32, **w, "n_tiles": I32, "num_programs": I32}
    norm = {"X": PTRS32, "center": lp, "W": lp, "WT_split": lp, "b": lp, "L_out": lp, "ll_out": PTRS64,
            "N": I32, "d": I32, "K": I32, "stride_x": I32, **w}
    stats = {"X": PTRS32, "center": lp, "W": lp, "b": lp, "L": lp, "n_out": PTRS64,
             "su_out": PTRS64, "N": I32, "d": I32, "stride_x": I32, **w, "n_tiles": I32, "n_splits": I32}
    return {
        "one_pass": (one_pass._one_pass_kernel, one, one_pass.launch_meta(cfg, k_pad, d_pad, precision)),
        "two_pass.normalizer": (two_pass._normalizer_kernel, norm, two_pass.normalizer_meta(cfg, k_pad, d_pad, precision)),
        "two_pass.statistics": (two_pass._statistics_kernel, stats, two_pass.statistics_meta(cfg, k_pad, d_pad, precision)),
    }


# kernels/full's parameters by name, as its launches pass them: data, weights, shifts, scratch and slab float32
# (slab_dtype float32), the ell partials float64, the feature-pair blocks int32; the scalars i32
FULL_TYPES = {**dict.fromkeys(("X", "center", "w", "Wa", "Wb", "bias", "shift", "scratch", "slab", "L", "L_out"),
                              PTRS32),
              "ll_part": PTRS64, "pair_i": "*i32", "pair_j": "*i32",
              **dict.fromkeys(("wa_lo", "wb_lo", "n_pairs", "N", "d", "stride_x", "n_tiles", "num_programs",
                               "n_splits", "slab_rows"), I32)}


def _full_kernels(algorithm: str) -> dict:
    """kernel name -> jit function of kernels/full's ``algorithm``."""
    from turbo_gmm.full import one_pass as full_one_pass, two_pass as full_two_pass

    if algorithm == "one_pass":
        return {"full.one_pass": full_one_pass._full_one_pass_kernel}
    return {"full.two_pass.normalizer": full_two_pass._full_normalizer_kernel,
            "full.two_pass.statistics": full_two_pass._full_statistics_kernel}


def _ws_pass2(k_pad: int, cfg: LaunchConfig, weighted: bool = False):
    """Algorithm 3's warp-specialized pass 2 (Gluon, d_pad = 32) as turbo_gmm.diag.two_pass_ws launches it: the
    kernel, its signature (a TMA descriptor of X's 64 x 32 tiles) and its compile-time parameters
    (``weighted``: with sample weights)."""
    import torch
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.jit import mangle_type

    from turbo_gmm.diag import two_pass_ws

    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    X = torch.empty(64, two_pass_ws.D_PAD)
    desc = TensorDescriptor(X, list(X.shape), [two_pass_ws.D_PAD, 1], [64, two_pass_ws.D_PAD], layout)
    sig = {"x_desc": mangle_type(desc), "center": PTRS32, "W": PTRS32, "b": PTRS32, "L": PTRS32, "n_out": PTRS64,
           "su_out": PTRS64, "N": I32, "n_tiles": I32, "n_splits": I32}
    constexprs = dict(K_PAD=k_pad, D_PAD=two_pass_ws.D_PAD, BLOCK_N=64, BLOCK_K=cfg.block_k,
                      STAGES=two_pass_ws.STAGES, LOADER_REGS=two_pass_ws.LOADER_REGISTERS)
    weight_sig, weight_constexprs = _weights_typed(weighted)
    sig.update(weight_sig)
    constexprs.update(weight_constexprs)
    source = GluonASTSource(two_pass_ws._statistics_kernel_ws, {**sig, **{k: "constexpr" for k in constexprs}},
                            constexprs=constexprs)
    return source, constexprs, {"num_warps": 4, "maxnreg": 128}


def _ws_one_pass(k_pad: int, pingpong: bool = False, weighted: bool = False, d_pad: int = 32, overlap: bool = False):
    """Algorithm 2 warp-specialized (Gluon) as turbo_gmm.diag.one_pass_ws launches it: the kernel's source, its
    compile-time parameters and launch options (``weighted``: with sample weights)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from turbo_gmm.diag import one_pass_ws

    meta = one_pass_ws.launch_meta(k_pad, d_pad, pingpong, overlap)
    constexprs = {k: v for k, v in meta.items() if k.isupper()}
    weight_sig, weight_constexprs = _weights_typed(weighted)
    constexprs.update(weight_constexprs)
    desc = f"tensordesc<fp32[{one_pass_ws.BLOCK_N}, {one_pass_ws.BOX_COLUMNS}],{one_pass_ws.x_layout()!r}>"
    sig = {"x_desc": desc, "center": PTRS32, "W": PTRS32, "b": PTRS32, "n_out": PTRS64, "su_out": PTRS64,
           "ll_out": PTRS64, "N": I32, "n_tiles": I32, **weight_sig, **{k: "constexpr" for k in constexprs}}
    source = GluonASTSource(one_pass_ws._one_pass_kernel_ws, sig, constexprs=constexprs)
    return source, constexprs, {"num_warps": meta["num_warps"], "maxnreg": meta["maxnreg"]}


def ws_one_pass_report(K: int, pingpong: bool = False, weighted: bool = False, d: int = 32,
                       overlap: bool = False) -> dict:
    """The warp-specialized one pass's sm_90 compile at (K, d): :func:`_usage` at its 4 x (consumers + 1) warps,
    plus what its schedule relies on -- setmaxnreg's register split, the planned shared memory, the SASS counts
    of the tensor-core products, their waits, and the spill loads and stores, and :func:`wgmma_serialized`."""
    from turbo_gmm.diag import one_pass_ws

    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    source, constexprs, options = _ws_one_pass(k_pad, pingpong, weighted, d_pad, overlap)
    warps = 4 * (one_pass_ws.CONSUMERS + 1)
    row = {"kernel": "one_pass.statistics_ws", "K": K, "d": d, "precision": "tf32x3", "num_warps": warps,
           "num_stages": constexprs["STAGES"], "max_registers": options["maxnreg"], "pingpong": pingpong,
           "weighted": weighted, "overlap": constexprs.get("OVERLAP", False),
           "gamma_buffers": constexprs["GAMMA_BUFFERS"],
           "shared_bytes_planned": one_pass_ws.shared_bytes(k_pad, d_pad, constexprs["GAMMA_BUFFERS"],
                                                            constexprs["STAGES"])}
    try:
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    except Exception as e:  # a configuration that does not compile is a finding, not a crash
        return {**row, "error": compile_error(e)}
    sass = _sass(compiled)
    schedule = Counter(re.findall(r"\b(HGMMA|WARPGROUP\.DEPBAR|WARPGROUP\.ARRIVE|STL|LDL|MUFU\.EX2)\b", sass))
    return {**row, **_usage(compiled, warps), "wgmma_serialized": wgmma_serialized(compiled),
            "setmaxnreg": sorted(set(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)",
                                                compiled.asm["ptx"]))),
            "sass_schedule": dict(sorted(schedule.items()))}


def one_pass_ws_k_pads() -> dict:
    from turbo_gmm.diag import one_pass_ws  # Gluon: imported where a warp-specialized report is asked for

    return one_pass_ws.K_PADS


def _cuobjdump() -> Path:
    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def compile_error(e: Exception) -> str:
    """A failed compile as a row's error: the innermost cause (a CompilationError's own text is where it failed, a
    caret under the source line; its cause says what failed), type and last line."""
    while e.__cause__ is not None:
        e = e.__cause__
    lines = str(e).strip().splitlines() or [""]
    return f"{type(e).__name__}: {lines[-1][:300]}"


# ptxas's advice when it gives up pipelining a kernel's wgmma (each then waits for the one before), e.g. C7515
# "... serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of
# the pipeline stage" or C7512 "... due to insufficient register resources"; Triton's compile does not print it
WGMMA_SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized due to (.+?)(?: in| for) the function")


def wgmma_serialized(compiled) -> str | None:
    """Why ptxas serialized the kernel's wgmma (None when it kept them pipelined): its own ``-v`` report of the
    compiled PTX (the PTX carries the launch's .maxnreg, so the register budget is the launch's)."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "kernel.ptx"
        ptx.write_text(compiled.asm["ptx"])
        arch = f"sm_{compiled.metadata.target.arch}a"  # wgmma and setmaxnreg are sm_90a instructions
        err = subprocess.run([get_ptxas(compiled.metadata.target.arch).path, f"-arch={arch}", "-v", str(ptx),
                              "-o", str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True, check=True).stderr
    m = WGMMA_SERIALIZED.search(err)
    return m.group(1) if m else None


def refuse_interpreter() -> None:
    if triton.knobs.runtime.interpret:
        raise RuntimeError("harness.studies.resources compiles for sm_90: run it without TRITON_INTERPRET=1")


def report(K: int, d: int, algorithm: str, precision: str = "tf32x3", cfg: LaunchConfig | None = None) -> list[dict]:
    """One row per kernel of ``algorithm`` at (K, d) with ``cfg`` (default: the H200 launch config)."""
    refuse_interpreter()
    cfg = cfg or launch_config(algorithm, K, d, precision)
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    rows = []
    for name, (fn, sig, meta) in triton_kernels(k_pad, d_pad, cfg, precision).items():
        if not name.startswith(algorithm) or (name == "two_pass.statistics" and cfg.warp_specialized_pass2
                                               and precision == "tf32x3" and d_pad == 32):
            continue  # (the warp-specialized pass 2 below takes Algorithm 3's pass 2 there; the Triton one pass
            # stays beside the warp-specialized one, which takes only N >= warp_specialized_one_pass_rows)
        warps = meta["num_warps"]
        row = {"kernel": name, "K": K, "d": d, "precision": precision, "num_warps": warps,
               "num_stages": meta["num_stages"], "max_registers": meta.get("maxnreg"),
               **{k: v for k, v in meta.items() if k.startswith("BLOCK")}}
        try:
            compiled = compile_triton_kernel(fn, sig, meta)
        except Exception as e:  # e.g. shared memory over the limit: a finding, not a crash
            rows.append({**row, "error": compile_error(e)})
            continue
        rows.append({**row, **_usage(compiled, warps), "ptx_f64_mma": dmma_count(compiled.asm["ptx"])})
    if algorithm == "two_pass" and precision == "tf32x3" and cfg.warp_specialized_pass2 and d_pad == 32:
        source, constexprs, options = _ws_pass2(k_pad, cfg)
        row = {"kernel": "two_pass.statistics_ws", "K": K, "d": d, "precision": precision, "num_warps": 8,
               "num_stages": constexprs["STAGES"], "max_registers": options["maxnreg"],
               **{k: v for k, v in constexprs.items() if k.startswith("BLOCK")}}
        try:  # registers: the launch's 128 a thread; setmaxnreg gives the compute warpgroup 232, the loader 24
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
            rows.append({**row, **_usage(compiled, 8), "wgmma_serialized": wgmma_serialized(compiled)})
        except Exception as e:
            rows.append({**row, "error": compile_error(e)})
    if (algorithm == "one_pass" and precision == "tf32x3" and cfg.warp_specialized_one_pass
            and k_pad in one_pass_ws_k_pads().get(d_pad, ())):
        rows.append(ws_one_pass_report(K, d=d, overlap=bool(cfg.one_pass_overlap)))
    return rows


def full_report(K: int, d: int, algorithm: str, moments: str = "center", dataflow: str = "products",
                precision: str = "tf32x3", cfg: FullConfig | None = None) -> list[dict]:
    """One row per full-covariance kernel of ``algorithm`` at (K, d), unweighted, with ``cfg`` (default:
    turbo_gmm.dispatch.full_launch_config): :func:`_usage` plus the SASS's tensor-core products (HMMA / HGMMA),
    which say whether the score and the statistics reached the tensor cores. Moments "component" is the
    statistics kernels' SHIFTED variant (one tensor-core product per component, kernels/full/tiles.py)."""
    refuse_interpreter()
    cfg = cfg or full_launch_config(algorithm, K, d, dataflow)
    k_pad, d_pad = padded_sizes(K, d)
    block_k = min(cfg.block_k, k_pad)  # the launch caps the component tile at K_pad
    meta = dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, BLOCK_K=block_k, F=PAIR_BLOCK, COLS=cfg.cols,
                DATAFLOW=dataflow, PRECISION=precision, WEIGHTED=False, SENTINEL_VALUE=SENTINEL,
                SHIFTED=moments == "component",
                RESIDENT=bool(cfg.resident_weights), PREFETCH=True)  # as launched on a GPU
    rows = []
    for name, fn in _full_kernels(algorithm).items():
        constexprs = {k: v for k, v in meta.items() if k in fn.arg_names}  # as each launch passes them
        sig = {a: "constexpr" if a in constexprs else FULL_TYPES[a] for a in fn.arg_names}
        row = {"kernel": name, "K": K, "d": d, "precision": precision, "moments": moments, "dataflow": dataflow,
               "block_n": cfg.block_n, "block_k": block_k, "cols": cfg.cols, "num_warps": cfg.num_warps,
               "num_stages": cfg.num_stages, "launch_programs_per_sm": cfg.programs_per_sm}
        try:
            compiled = triton.compile(ASTSource(fn, sig, constexprs=constexprs), target=GPUTarget("cuda", 90, 32),
                                      options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        except Exception as e:  # e.g. a COLS that is no power of two: a finding, not a crash
            rows.append({**row, "error": compile_error(e)})
            continue
        sass = _sass(compiled)
        rows.append({**row, **_usage(compiled, cfg.num_warps),
                     "sass_tensor_core_ops": len(re.findall(r"\bH(?:G)?MMA\b", sass)),
                     "sass_shared_stores": shared_stores(sass)})
    return rows


def shared_stores(sass: str) -> str:
    """The SASS's shared-memory stores by kind, e.g. 'STS 41, STS.64 38, STSM 4': scalar STS of a transposed
    operand are where the H200 counted 8-way bank conflicts (results/h200/ncu/ncu_full_one_pass_20M.*), STSM
    (stmatrix) stores an operand tile conflict-free."""
    kinds = re.findall(r"\b(STS(?:\.\d+)?|STSM)\b", sass)
    return ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds)))


def dmma_count(ptx: str) -> int:
    """Float64 tensor-core products (DMMA) in a kernel's PTX: mma.sync with f64 operands, m8n8k4 on sm_80,
    m16n8k16 where Triton targets sm_90."""
    return len(re.findall(r"mma\.sync\.aligned\.m\d+n\d+k\d+\S*\.f64", ptx))


def _sass(compiled) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        return subprocess.run([str(_cuobjdump()), "-sass", f.name], capture_output=True, text=True, check=True).stdout


def _usage(compiled, warps: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        res = subprocess.run([str(_cuobjdump()), "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([str(_cuobjdump()), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    regs = int(re.search(r"REG:(\d+)", res).group(1))
    stack = int(re.search(r"STACK:(\d+)", res).group(1))
    smem = int(compiled.metadata.shared)
    by_regs = SM90["registers"] // (_round_up(regs * 32, 256) * warps)
    by_smem = SM90["shared_bytes"] // (smem + SM90["reserved_shared_per_program"])
    ops = Counter(m.group(0) for m in re.finditer(r"\b(?:REDG|ATOMG|RED|ATOM|MEMBAR|CCTL)\.[A-Z0-9._]+", sass))
    return {"registers": regs, "stack_bytes": stack, "shared_bytes": smem, "programs_by_registers": by_regs,
            "programs_by_shared": by_smem, "programs_per_sm": min(by_regs, by_smem, SM90["max_programs"],
                                                                  SM90["max_warps"] // warps),
            "sass_atomics_and_barriers": dict(sorted(ops.items())),
            "exp_subnormal_fixups": len(re.findall(EX2_SUBNORMAL_FIXUP, sass))}


# gl.exp / tl.exp lower to ex2.approx.f32, which ptxas keeps exact for results below 2^-126 with this compare
# (then a halving before MUFU.EX2 and a squaring after); turbo_gmm.diag.two_pass_ws.exp_ftz has none
EX2_SUBNORMAL_FIXUP = r"FSETP\.GEU\.AND P\d+, PT, R\d+, -126"


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def main(argv=None) -> None:
    p = shape_arguments(__doc__.split("\n\n")[0])
    p.add_argument("--covariance", default="diag", choices=("diag", "full"))
    p.add_argument("--moments", default="center", choices=("center", "component"), help="full only")
    p.add_argument("--dataflow", default="products", choices=("products", "lift"), help="full only")
    p.add_argument("--config", action="append", default=[None],
                   help="LaunchConfig as in harness.studies.measure, or under full FullConfig fields over "
                        "default_config (repeatable)")
    a = p.parse_args(argv)
    if a.covariance == "full" and a.precision not in FLOAT32_PRECISIONS:
        p.error(f"--covariance full takes --precision {' or '.join(FLOAT32_PRECISIONS)}")
    for text in a.config:
        rows = (report(a.K, a.d, a.algorithm, a.precision, parse_config(text)) if a.covariance == "diag" else
                full_report(a.K, a.d, a.algorithm, a.moments, a.dataflow, a.precision,
                            parse_full_config(text, a.algorithm, a.K, a.d, a.dataflow)))
        for row in rows:
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
