"""E-step statistics of tied covariances for a block of rows, and the data's scatter the tied M-step needs.

As :mod:`turbo_gmm.full.estep` (whose block this extends): float64 n_k, s_k and ell about a shared center, from
the tied kernels on the device or float64 torch ops. The tied M-step also needs the data's weighted scatter
sum_i w_i (x_i - c)(x_i - c)^T, taken once per fit (:func:`centered_moments`), not once per iteration."""
from __future__ import annotations

import torch

from ..dispatch import launch_config, resolve_algorithm
from ..full.estep import BlockStatistics as FullBlockStatistics, CovarianceStatistics
from . import em as tied_em


def bytes_per_row(K: int, d: int) -> int:
    """Bytes of the torch fallback's float64 temporaries per row: x, the (K,) score rows and the (K, d) whitened
    rows."""
    return 16 * d + 24 * K + 8 * K * d


def centered_moments(X: torch.Tensor, sample_weight, center: torch.Tensor):
    """(sum_i w_i (x_i - c)(x_i - c)^T (d, d), sum_i w_i (x_i - c) (d,)) in float64, in row chunks: the tied
    M-step's data term (once per fit) and its initialization's."""
    d = X.shape[1]
    scatter = torch.zeros(d, d, dtype=torch.float64, device=X.device)
    first = torch.zeros(d, dtype=torch.float64, device=X.device)
    c = center.to(device=X.device, dtype=torch.float64)
    for r0 in range(0, X.shape[0], tied_em.SCATTER_ROWS):
        x = X[r0 : r0 + tied_em.SCATTER_ROWS].double() - c
        if sample_weight is not None:
            x_w = x * sample_weight[r0 : r0 + tied_em.SCATTER_ROWS, None].to(device=X.device, dtype=torch.float64)
        else:
            x_w = x
        scatter += x_w.T @ x
        first += x_w.sum(0)
    return scatter, first


class BlockStatistics(FullBlockStatistics):
    """:class:`CovarianceStatistics` (M2 None) of row blocks for the tied covariance: the tied kernels take
    diag's algorithm rule and tiles."""

    second_moments = False

    def _resolve(self, K, d, algorithm, precision):
        self.algorithm, self.dataflow = resolve_algorithm(K, d, algorithm, precision), "whitened"
        self.cfg = launch_config(self.algorithm, K, d)

    def _kernel_statistics(self, X, sw, weights, means, U):
        if self.ws is None or (self.ws.L is not None and self.ws.L.shape[0] < X.shape[0]):
            self.ws = tied_em.Workspace(X, self.K, self.algorithm, self.center64, None, scatter=False)
        n, s, ll = tied_em.workspace_statistics(X, sw, weights, means, U, self.ws, self.algorithm, self.precision,
                                                self.cfg)
        return n, s, None, ll

    def retry_about_components(self) -> bool:
        return False  # the tied kernels sum no second moments

    def mstep(self, st: CovarianceStatistics, reg_covar: float, scatter=None, guard: float | None = None):
        """(weights, means, covariance, precisions Cholesky, ok) by the tied float64 M-step; ``scatter``: a callable
        giving the data's weighted scatter about the center."""
        return tied_em.mstep_tied(st.n, st.s, scatter(), self.center64, reg_covar, guard)
