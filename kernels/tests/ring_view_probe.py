"""Compiled (never run) by test_two_pass_ws.py: prints what Triton's compiler says of the statistics' view of a
ring stage (turbo_gmm.diag.two_pass_ws.transposed_lift) against the plain transpose: the bank conflicts of wgmma's A
operand loads from each, and the new view's linear layout."""
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

from turbo_gmm.diag.two_pass_ws import D_PAD, transposed_lift

BLOCK_N = 64


@gluon.jit
def ring_view_probe(x, BLOCK_N: gl.constexpr, D_PAD: gl.constexpr):
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 32, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=1)
    ring = gl.allocate_shared_memory(gl.float32, [2, 2 * BLOCK_N, D_PAD],
                                     gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2))
    both = ring.index(0)
    plain = both.reshape([2, BLOCK_N, D_PAD]).permute((0, 2, 1)).reshape([2 * D_PAD, BLOCK_N])
    view = transposed_lift(both, BLOCK_N, D_PAD)
    operand: gl.constexpr = gl.distributed_type(gl.float32, [2 * D_PAD, BLOCK_N], a_op)
    gl.static_print("conflicts", gl.bank_conflicts(operand, plain.type), gl.bank_conflicts(operand, view.type))
    gl.static_print("view", view.type)


if __name__ == "__main__":
    triton.compile(GluonASTSource(ring_view_probe, {"x": "*fp32", "BLOCK_N": "constexpr", "D_PAD": "constexpr"},
                                  constexprs={"BLOCK_N": BLOCK_N, "D_PAD": D_PAD}),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
