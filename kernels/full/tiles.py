"""Triton pieces the full-covariance kernels share: the row tile, the two scores, the statistics.

A score tile is S[rows, k0 : k0 + BLOCK_K] (float32, padded components at the sentinel), by either dataflow:

- ``products``: y = (x - c) @ Lcat[:, cols] - off[cols], COLS columns per tl.dot, ||y||^2 per component;
- ``lift``: (x - c) @ Wl plus, per feature-block pair (I, J), phi @ Wq[pair], phi the outer product of the
  row tile's blocks I and J formed in registers.

The statistics of a responsibility tile g are n = sum g, s = (x - c)^T g and per block pair phi^T g (the
upper block triangle of the second moments), added into the program's own slot of a slab in global memory
(d^2 / 2 sums a component do not fit in registers) by relaxed atomic adds: one program owns a slot, so the
order is its row tiles', and no tile waits on L2. Products are TF32 splits. Moments "component" (the
fallback of :mod:`turbo_gmm.full.em`) sums about each component's own incoming mean instead."""
from __future__ import annotations

import triton
import triton.language as tl

from .. import tf32x3


@triton.jit
def centered_tile(X, center, rows, cols, N, d, stride_x):
    """x - c at rows x cols, zero outside the data (rows >= N or cols >= d)."""
    ok = (rows < N)[:, None] & (cols < d)[None, :]
    x = tl.load(X + rows.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=ok, other=0.0)
    c = tl.load(center + cols, mask=cols < d, other=0.0)
    return tl.where(ok, x - c[None, :], 0.0)


@triton.jit
def prefetch_rows(X, rows, N, stride_x, D_PAD: tl.constexpr, PREFETCH: tl.constexpr):
    """Ask L2 for the rows of X a tile ahead (prefetch.global.L2, no registers held); rows past N clamp to the
    last. A no-op unless PREFETCH (the interpreter has no inline PTX)."""
    if PREFETCH:
        LINES: tl.constexpr = (D_PAD * 4 + 127) // 128  # 128-byte lines a row spans (at most; rows need not align)
        line = tl.arange(0, LINES) * 32
        r = tl.minimum(rows, N - 1).to(tl.int64)
        ptrs = X + r[:, None] * stride_x + line[None, :]
        tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def row_weights(w, rows, N, WEIGHTED: tl.constexpr):
    """The rows' sample weights (1 without them), 0 past N."""
    if WEIGHTED:
        return tl.load(w + rows, mask=rows < N, other=0.0)
    else:
        return tl.where(rows < N, 1.0, 0.0)


@triton.jit
def pair_features(X, center, rows, pair_i, pair_j, p, N, d, stride_x, BLOCK_N: tl.constexpr, F: tl.constexpr):
    """phi (BLOCK_N x F*F): (x - c)_{I F + a} (x - c)_{J F + b} at lane a F + b, for block pair p = (I, J)."""
    a = tl.arange(0, F)
    xi = centered_tile(X, center, rows, tl.load(pair_i + p) * F + a, N, d, stride_x)
    xj = centered_tile(X, center, rows, tl.load(pair_j + p) * F + a, N, d, stride_x)
    return tl.reshape(xi[:, :, None] * xj[:, None, :], [BLOCK_N, F * F])


@triton.jit
def load_split(W, w_lo, offsets, PRECISION: tl.constexpr):
    """A host-split operand (turbo_gmm.full.parameters.split_tf32): (high, low) under tf32x3, else (W, W)."""
    hi = tl.load(W + offsets)
    if PRECISION == "tf32x3":
        return hi, tl.load(W + w_lo + offsets)
    else:
        return hi, hi


@triton.jit
def weight_columns(Lcat, l_lo, cols, D_PAD: tl.constexpr, PRECISION: tl.constexpr):
    """Lcat[:, cols] (D_PAD x len(cols)), high and low, from Lcat stored K-major (wgmma's B order)."""
    dd = tl.arange(0, D_PAD)
    return load_split(Lcat, l_lo, cols[None, :] * D_PAD + dd[:, None], PRECISION)


@triton.jit
def add_component_norms(q, x_hi, x_lo, u_hi, u_lo, off_j, j, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, COLS: tl.constexpr, PRECISION: tl.constexpr):
    """q (BLOCK_N x BLOCK_K) plus ||(x - c) U_k - mu'_k U_k||^2 of the components of the tile's j-th product, whose
    COLS weight columns are (u_hi, u_lo) and offsets off_j (COLS // d_pad components, or a d_pad / COLS-th of one)."""
    G: tl.constexpr = COLS // D_PAD if COLS >= D_PAD else 1  # components per product
    SUB: tl.constexpr = COLS // G  # columns of one component per product
    kl = tl.arange(0, BLOCK_K)
    y = tf32x3.dot(x_hi, x_lo, u_hi, u_lo, tl.zeros([BLOCK_N, COLS], tl.float32), PRECISION) - off_j[None, :]
    part = tl.sum(tl.reshape(y * y, [BLOCK_N, G, SUB]), 2)  # (BLOCK_N, G): this product's components
    comp = (j * COLS) // D_PAD + tl.arange(0, G)
    return q + tl.sum(tl.where(kl[None, None, :] == comp[None, :, None], part[:, :, None], 0.0), 1)


@triton.jit
def products_score(x_hi, x_lo, Lcat, l_lo, off, b, k0, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, COLS: tl.constexpr, PRECISION: tl.constexpr):
    """S[:, k0 : k0 + BLOCK_K] = b - ||(x - c) U_k - mu'_k U_k||^2 / 2 by per-component products."""
    q = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for j in range(0, BLOCK_K * D_PAD // COLS):
        cols = k0 * D_PAD + j * COLS + tl.arange(0, COLS)
        u_hi, u_lo = weight_columns(Lcat, l_lo, cols, D_PAD, PRECISION)
        q = add_component_norms(q, x_hi, x_lo, u_hi, u_lo, tl.load(off + cols), j, D_PAD, BLOCK_N, BLOCK_K, COLS,
                                PRECISION)
    return tl.load(b + k0 + tl.arange(0, BLOCK_K))[None, :] - 0.5 * q


@triton.jit
def resident_weights(Lcat, l_lo, k0, D_PAD: tl.constexpr, BLOCK_K: tl.constexpr, COLS: tl.constexpr,
                     PRECISION: tl.constexpr):
    """(high, low) weight columns of the component tile at k0, loaded once before a program's row tiles
    (FullConfig.resident_weights): loop invariant, so they stay in shared memory for the program's lifetime."""
    his = ()
    los = ()
    for j in tl.static_range(BLOCK_K * D_PAD // COLS):
        u_hi, u_lo = weight_columns(Lcat, l_lo, k0 * D_PAD + j * COLS + tl.arange(0, COLS), D_PAD, PRECISION)
        his = his + (u_hi,)
        los = los + (u_lo,)
    return his, los


@triton.jit
def resident_products_score(x_hi, x_lo, his, los, off, b, k0, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, COLS: tl.constexpr, PRECISION: tl.constexpr):
    """:func:`products_score` on the weights of :func:`resident_weights`."""
    q = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for j in tl.static_range(BLOCK_K * D_PAD // COLS):
        off_j = tl.load(off + k0 * D_PAD + j * COLS + tl.arange(0, COLS))
        q = add_component_norms(q, x_hi, x_lo, his[j], los[j], off_j, j, D_PAD, BLOCK_N, BLOCK_K, COLS, PRECISION)
    return tl.load(b + k0 + tl.arange(0, BLOCK_K))[None, :] - 0.5 * q


@triton.jit
def lift_score(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x,
               Wq, wq_lo, Wl, wl_lo, bl, k0,
               K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               F: tl.constexpr, PRECISION: tl.constexpr):
    """S[:, k0 : k0 + BLOCK_K] = phi Wq + (x - c) Wl + bl by the quadratic lift."""
    kk = k0 + tl.arange(0, BLOCK_K)
    dd = tl.arange(0, D_PAD)
    ff = tl.arange(0, F * F)
    l_hi, l_lo = load_split(Wl, wl_lo, dd[:, None] * K_PAD + kk[None, :], PRECISION)
    acc = tf32x3.dot(x_hi, x_lo, l_hi, l_lo, tl.zeros([BLOCK_N, BLOCK_K], tl.float32), PRECISION)
    for p in range(0, n_pairs):
        phi_hi, phi_lo = tf32x3.split(pair_features(X, center, rows, pair_i, pair_j, p, N, d, stride_x, BLOCK_N, F),
                                      PRECISION)
        q_hi, q_lo = load_split(Wq, wq_lo, (p * F * F + ff)[:, None] * K_PAD + kk[None, :], PRECISION)
        acc = tf32x3.dot(phi_hi, phi_lo, q_hi, q_lo, acc, PRECISION)
    return acc + tl.load(bl + kk)[None, :]


@triton.jit
def score_tile(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x, Wa, wa_lo, Wb, wb_lo, bias, k0,
               K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               F: tl.constexpr, COLS: tl.constexpr, DATAFLOW: tl.constexpr, PRECISION: tl.constexpr):
    """The score tile by DATAFLOW: ``products`` (Wa = Lcat, Wb = off) or ``lift`` (Wa = Wq, Wb = Wl)."""
    if DATAFLOW == "products":
        return products_score(x_hi, x_lo, Wa, wa_lo, Wb, bias, k0, D_PAD, BLOCK_N, BLOCK_K, COLS, PRECISION)
    else:
        return lift_score(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x, Wa, wa_lo, Wb, wb_lo,
                          bias, k0, K_PAD, D_PAD, BLOCK_N, BLOCK_K, F, PRECISION)


@triton.jit
def accumulate_statistics(slab, KW, ROWS, kofs, g, x_hi, x_lo, X, center, shift, rows, pair_i, pair_j, n_pairs, N,
                          d, stride_x, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          F: tl.constexpr, PRECISION: tl.constexpr, SHIFTED: tl.constexpr):
    """slab[:, kofs : kofs + BLOCK_K] += (n, s, pair blocks) of the responsibility tile g, as TF32-split products.

    Not SHIFTED (moments "center"): moments about the center, every component of the tile at once.
    SHIFTED (moments "component"): about each component's own shift m_k (``shift`` row j: the tile's j-th
    incoming mean, centered), one product per component; float32 rounding is then u32 |x - m_k|^2 rather than
    u32 |x - c|^2, which a far component with fewer points than dimensions needs. The slab is then
    component-major; :func:`turbo_gmm.full.parameters.unpack_statistics` moves the sums back to c."""
    kl = kofs + tl.arange(0, BLOCK_K)
    ff = tl.arange(0, F * F)
    if SHIFTED:
        add_to_slab(slab + kl * ROWS, tl.sum(g, 0))
        shifted_moments(slab + kofs * ROWS, ROWS, g, X, center, shift, rows, N, d, stride_x, D_PAD, BLOCK_N,
                        BLOCK_K, F, PRECISION)
    else:
        g_hi, g_lo = tf32x3.split(g, PRECISION)
        part = tf32x3.dot(tl.trans(x_hi), tl.trans(x_lo), g_hi, g_lo, tl.zeros([D_PAD, BLOCK_K], tl.float32),
                          PRECISION)
        add_first_moments(slab, KW, kl, tl.sum(g, 0), part, D_PAD)
        for p in range(0, n_pairs):
            phi = pair_features(X, center, rows, pair_i, pair_j, p, N, d, stride_x, BLOCK_N, F)
            phi_hi, phi_lo = tf32x3.split(phi, PRECISION)
            block = tf32x3.dot(tl.trans(phi_hi), tl.trans(phi_lo), g_hi, g_lo, tl.zeros([F * F, BLOCK_K], tl.float32),
                               PRECISION)
            add_to_slab(slab + (1 + D_PAD + p * F * F + ff)[:, None] * KW + kl[None, :], block)


@triton.jit
def add_to_slab(ptr, value, mask=None):
    """*ptr += value in the program's own slab slot by a relaxed atomic (a fire-and-forget L2 reduction, no round
    trip). One program owns a slot, so the order is its tiles'. Float32 adds flush subnormals to zero."""
    tl.atomic_add(ptr, value.to(ptr.dtype.element_ty), mask=mask, sem="relaxed")


@triton.jit
def add_first_moments(slab, KW, kl, n, s, D_PAD: tl.constexpr):
    """slab[0, kl] += n and slab[1 : 1 + D_PAD, kl] += s (s: D_PAD x len(kl)), in the center moments' layout."""
    add_to_slab(slab + kl, n)
    add_to_slab(slab + (1 + tl.arange(0, D_PAD))[:, None] * KW + kl[None, :], s)


@triton.jit
def moment_rows(d, D_PAD: tl.constexpr, F: tl.constexpr):
    """(rows, upper), D_PAD x D_PAD: the statistics-table row of second moment (a, b) within the pair blocks, and
    whether it is stored (the upper block triangle, padded blocks left out)."""
    dd = tl.arange(0, D_PAD)
    blocks = (d + F - 1) // F
    bi = (dd // F)[:, None]
    bj = (dd // F)[None, :]
    pair = bi * blocks - bi * (bi - 1) // 2 + (bj - bi)
    return 1 + D_PAD + pair * (F * F) + (dd % F)[:, None] * F + (dd % F)[None, :], (bi <= bj) & (bj < blocks)


@triton.jit
def shifted_moments(slab, ROWS, g, X, center, shift, rows, N, d, stride_x,
                    D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, F: tl.constexpr,
                    PRECISION: tl.constexpr):
    """:func:`accumulate_statistics`'s moments about each component's own shift: per component j,
    y = x - c - m_j and one product (g_j y)^T y into its upper block triangle; ``slab`` component-major."""
    kj = tl.arange(0, BLOCK_K)
    dd = tl.arange(0, D_PAD)
    x = centered_tile(X, center, rows, dd, N, d, stride_x)
    m2_rows, upper = moment_rows(d, D_PAD, F)
    for j in range(0, BLOCK_K):
        gj = tl.sum(tl.where(kj[None, :] == j, g, 0.0), 1)  # column j of g: (BLOCK_N,), 0 past N
        y = x - tl.load(shift + j * D_PAD + dd)[None, :]
        gy = y * gj[:, None]
        add_to_slab(slab + j * ROWS + 1 + dd, tl.sum(gy, 0))
        a_hi, a_lo = tf32x3.split(tl.trans(gy), PRECISION)
        b_hi, b_lo = tf32x3.split(y, PRECISION)
        m2 = tf32x3.dot(a_hi, a_lo, b_hi, b_lo, tl.zeros([D_PAD, D_PAD], tl.float32), PRECISION)
        add_to_slab(slab + j * ROWS + m2_rows, m2, upper)
