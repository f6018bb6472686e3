"""What differs per covariance type (internal): one object per type instead of branches on ``covariance_type``.

``COVARIANCES[covariance_type]`` knows its parameters' shapes, the fitted attributes scikit-learn exposes,
the free-parameter count, sampling, the initial covariances from moments, the E-step block a fit runs and
the float32 score's error bound. EM parameters are (weights, means, variances) for diag and spherical
(variances (K, d) or (K,)) and (weights, means, covariances, precisions Cholesky) for full and tied."""
from __future__ import annotations

import numpy as np
import torch

from .diag.estep import BlockStatistics as DiagonalBlock, log_responsibilities as diagonal_log_responsibilities
from .diag.mstep import IllDefinedCovarianceError, well_defined
from .diag.precision import covariance_lift_error_bound, lift_error_bound
from .full import estep as full_estep
from .full.parameters import cholesky_precisions
from .tied import estep as tied_estep


class Diagonal:
    """Diagonal covariances (``spherical``: one variance a component); the lifted kernels of ``diag/``."""

    matrix = False
    second = "diag"  # the initial responsibilities' second moments: per feature

    def __init__(self, name: str):
        self.name, self.spherical = name, name == "spherical"

    def precisions_shape(self, K: int, d: int) -> tuple:
        return (K,) if self.spherical else (K, d)

    def check_precisions(self, p: np.ndarray) -> None:
        if (p <= 0).any():
            raise ValueError(f"'{self.name} precision' should be positive")

    def from_precisions(self, precisions):
        """(covariances, None) from the user's precisions_init."""
        return torch.as_tensor(1.0 / np.asarray(precisions, np.float64)), None

    def attributes(self, params):
        """(covariances_, precisions_cholesky_, precisions_) from float64 host parameters."""
        cov = params[2]
        return cov, 1.0 / np.sqrt(cov), 1.0 / cov

    def fitted(self, est) -> tuple:
        return est.weights_, est.means_, est.covariances_

    def n_parameters(self, K: int, d: int) -> int:
        return (K if self.spherical else K * d) + K * d + K - 1

    def sample(self, rng, means, covariances, counts):
        d = means.shape[1]
        return np.vstack([mean + rng.standard_normal(size=(c, d)) * np.sqrt(cov)
                          for mean, cov, c in zip(means, covariances, counts)])

    def bytes_per_row(self, K: int, d: int) -> int:
        """Float64 temporaries a row takes in the torch score: x and the (K,) score rows."""
        return 16 * d + 24 * K

    def well_defined_start(self, params) -> torch.Tensor:
        return well_defined(*params)

    def initial_covariances(self, nk, means, sx, sxx, n_raw, reg_covar, init_params, offset, centered_moments):
        """(covariances, None): the M-step on the initial responsibilities' moments (n, s, u) about ``offset``."""
        cov = sxx / nk[:, None] - means**2 + reg_covar
        return (cov.mean(1) if self.spherical else cov), None

    def variances(self, v: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
        """(K, d) variances for the diag kernels (spherical: each component's one variance repeated)."""
        return v[:, None].expand(*means.shape) if v.ndim == 1 else v

    def block_operands(self, params) -> tuple:
        """(weights, means, variances (K, d)): what an E-step block takes."""
        w, m, v = params
        return w, m, self.variances(v, m)

    def block(self, K, d, center, backend, algorithm="auto", precision="tf32x3"):
        return DiagonalBlock(K, d, center, backend, algorithm, precision)

    def score_operand(self, est, device):
        """The fitted second parameter and the log-responsibilities function that scores with it."""
        K, d = est.means_.shape
        v = est.covariances_
        v = np.ascontiguousarray(np.broadcast_to(v[:, None], (K, d)) if v.ndim == 1 else v)
        return torch.as_tensor(v, dtype=torch.float64, device=device), diagonal_log_responsibilities

    def error_bound(self, radius, params, center) -> torch.Tensor:
        _, m, v = params
        return lift_error_bound(radius, m, self.variances(v, m), center)


class Full:
    """One full covariance a component; the kernels of ``full/``."""

    matrix = True
    second = "full"
    name = "full"
    estep = full_estep

    def precisions_shape(self, K: int, d: int) -> tuple:
        return (K, d, d)

    def check_precisions(self, p: np.ndarray) -> None:
        """scikit-learn's _check_precision_matrix, per matrix."""
        d = p.shape[-1]
        for matrix in p.reshape(-1, d, d):
            if not (np.allclose(matrix, matrix.T) and (np.linalg.eigvalsh(matrix) > 0).all()):
                raise ValueError(f"'{self.name} precision' should be symmetric, positive-definite")

    def from_precisions(self, precisions):
        """(covariances, U) from the user's precisions_init: scikit-learn's upper factor U (U U^T = P), the
        Cholesky factor of P reversed in rows and columns, reversed back."""
        P = np.asarray(precisions, np.float64)
        U = np.linalg.cholesky(P[..., ::-1, ::-1])[..., ::-1, ::-1]
        # a copy: at d = 1 np.ascontiguousarray keeps the reversed view's negative strides, which torch refuses
        return torch.as_tensor(np.linalg.inv(P)), torch.as_tensor(U.copy())

    def attributes(self, params):
        U = params[3]
        return params[2], U, U @ np.swapaxes(U, -1, -2)

    def fitted(self, est) -> tuple:
        return est.weights_, est.means_, est.covariances_, est.precisions_cholesky_

    def n_parameters(self, K: int, d: int) -> int:
        return K * d * (d + 1) // 2 + K * d + K - 1

    def sample(self, rng, means, covariances, counts):
        return np.vstack([rng.multivariate_normal(mean, cov, int(c)) for mean, cov, c in zip(means, covariances, counts)])

    def bytes_per_row(self, K: int, d: int) -> int:
        return self.estep.bytes_per_row(K, d)

    def well_defined_start(self, params) -> torch.Tensor:
        w, m, _, U = params
        return well_defined(w, m, torch.ones(1, dtype=torch.float64, device=w.device)) & torch.isfinite(U).all()

    def initial_covariances(self, nk, means, sx, sxx, n_raw, reg_covar, init_params, offset, centered_moments):
        """(covariances, precisions Cholesky): the M-step on the initial moments; scikit-learn's ValueError where
        a Cholesky fails."""
        cov = self._covariances(nk, means, sx, sxx, n_raw, reg_covar, init_params, offset, centered_moments)
        U, ok = cholesky_precisions(cov)
        if not bool(ok):
            raise IllDefinedCovarianceError()
        return cov, U

    def _covariances(self, nk, means, sx, sxx, n_raw, reg_covar, init_params, offset, centered_moments):
        eye = reg_covar * torch.eye(means.shape[1], dtype=torch.float64, device=means.device)
        if init_params in ("k-means++", "random_from_data"):  # one row per component (weight n_raw):
            deviation = sx / n_raw[:, None] - means  # scikit-learn's sum r (x - mu)(x - mu)^T / n, not M2 / n -
            # mu mu^T, which cancels to eps |x|^2, far above its ~eps^2
            return n_raw[:, None, None] * deviation[:, :, None] * deviation[:, None, :] / nk[:, None, None] + eye
        return sxx / nk[:, None, None] - means[:, :, None] * means[:, None, :] + eye

    def block_operands(self, params) -> tuple:
        w, m, _, U = params
        return w, m, U

    def block(self, K, d, center, backend, algorithm="auto", precision="tf32x3"):
        return self.estep.BlockStatistics(K, d, center, backend, algorithm, precision)

    def score_operand(self, est, device):
        U = torch.as_tensor(est.precisions_cholesky_, dtype=torch.float64, device=device)
        return U, full_estep.log_responsibilities

    def error_bound(self, radius, params, center) -> torch.Tensor:
        _, m, _, U = params
        return covariance_lift_error_bound(radius, m, U, center)


class Tied(Full):
    """One full covariance shared by every component; the kernels of ``tied/``."""

    name = "tied"
    estep = tied_estep

    def precisions_shape(self, K: int, d: int) -> tuple:
        return (d, d)

    def n_parameters(self, K: int, d: int) -> int:
        return d * (d + 1) // 2 + K * d + K - 1

    def sample(self, rng, means, covariances, counts):
        return super().sample(rng, means, [covariances] * len(counts), counts)

    def _covariances(self, nk, means, sx, sxx, n_raw, reg_covar, init_params, offset, centered_moments):
        eye = reg_covar * torch.eye(means.shape[1], dtype=torch.float64, device=means.device)
        outer = (nk[:, None, None] * (means[:, :, None] * means[:, None, :])).sum(0)
        if init_params not in ("k-means++", "random_from_data"):  # every row's responsibilities sum to its weight
            return (sxx.sum(0) - outer) / nk.sum() + eye
        # one row per component: scikit-learn's X^T X over all rows, about ``offset`` (exact algebra)
        scatter, first, total = centered_moments()
        c, gap = offset.to(means.device), first.to(means.device) - sx.sum(0)
        spread = scatter.to(means.device) - outer + c[:, None] * gap + gap[:, None] * c
        return (spread + (total - nk.sum()) * c[:, None] * c) / nk.sum() + eye


COVARIANCES = {"full": Full(), "tied": Tied(), "diag": Diagonal("diag"), "spherical": Diagonal("spherical")}
COVARIANCE_TYPES = tuple(COVARIANCES)
