"""torchgmm 0.1.4 (PyCave fork, PyTorch Lightning), driven through its Lightning module.

The estimator ``torchgmm.bayes.GaussianMixture`` cannot start from a given
(weights, variances): it re-estimates both from hard assignments to the initial
means, and it runs two epochs per EM iteration. So (arms/README.md, the torchgmm row)
we set the ``GaussianMixtureModel``'s buffers from the shared init
(``precisions_cholesky = V^-1/2`` for "diag") and fit
``GaussianMixtureLightningModule(model, convergence_tolerance=0.0,
covariance_regularization=reg_covar, is_batch_training=False)`` with a
``pl.Trainer(max_epochs=n_iter)`` over torchgmm's own ``DataLoader`` holding the
whole of X in one batch: one epoch = one E-step + one M-step, and tolerance 0
removes the EarlyStopping callback, so exactly n_iter iterations run (a test
counts them). X is already on the device; torchgmm's loader slices it without
a host copy.

Each call builds a fresh module and Trainer: Lightning's per-fit set-up and
teardown (including moving the model to the device and back to the CPU at the
end) is inside the timed call, because it is what one fit with this library costs.
Silent failure: the M-step divides by n_k with no epsilon, so an empty
component yields NaN without any error. ``Fit.n_iter`` is the Trainer's epoch count.
Full covariances: ``covariance_type="full"``, the buffer set by torchgmm's own
``cholesky_precision(covariances, "full")`` (its lower-triangular factor, not scikit-learn's upper one).
"""
from __future__ import annotations

import logging

import torch

from turbo_gmm.records import Fit, Init

MEMORY = "torch"
COVARIANCE_TYPES = ("diag", "full")


def available() -> str | None:
    try:
        import pytorch_lightning  # noqa: F401
        import torchgmm.bayes.gmm  # noqa: F401
    except ImportError as e:
        return f"torchgmm/pytorch-lightning not installed: {e}"
    return None


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    import pytorch_lightning as pl
    from torchgmm.base.data import DataLoader, collate_tensor, dataset_from_tensors
    from torchgmm.bayes.core import cholesky_precision
    from torchgmm.bayes.gmm import GaussianMixtureModel, GaussianMixtureModelConfig
    from torchgmm.bayes.gmm.lightning_module import GaussianMixtureLightningModule

    for name in ("pytorch_lightning", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    K, d = init.means.shape
    w0 = torch.as_tensor(init.weights / init.weights.sum())
    m0 = torch.as_tensor(init.means)
    covariance_type = opts.get("covariance_type", "diag")
    if covariance_type == "full":
        prec_chol0 = cholesky_precision(torch.as_tensor(init.covariances), "full")
    else:
        prec_chol0 = torch.as_tensor(init.variances).rsqrt()
    loader = DataLoader(dataset_from_tensors(X), batch_size=X.shape[0], collate_fn=collate_tensor)
    accelerator = "gpu" if X.is_cuda else "cpu"
    info = {
        "algorithm": "materializing",
        "precision": "fp32",
        "device": f"{X.device.type} (lightning {pl.__version__})",
        "timed_overhead": "Lightning Trainer set-up/teardown per fit is inside the timed call",
    }

    def run() -> Fit:
        model = GaussianMixtureModel(GaussianMixtureModelConfig(num_components=K, num_features=d,
                                                                covariance_type=covariance_type))
        model.component_probs.copy_(w0)
        model.means.copy_(m0)
        model.precisions_cholesky.copy_(prec_chol0)
        module = GaussianMixtureLightningModule(
            model, convergence_tolerance=0.0, covariance_regularization=float(opts["reg_covar"]),
            is_batch_training=False,
        )
        trainer = pl.Trainer(
            max_epochs=n_iter, accelerator=accelerator, devices=1, precision="32-true", logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(module, loader)
        if covariance_type == "full":
            return Fit(model.component_probs, model.means, None, n_iter=trainer.current_epoch, info=info,
                       covariances=model.covariances)
        return Fit(model.component_probs, model.means, model.covariances, n_iter=trainer.current_epoch, info=info)

    return run


def prepare_e2e(X_host, X_device, K, opts):
    """The estimator ``torchgmm.bayes.GaussianMixture`` of the cell's covariance type (torchgmm's "diag" or
    "full") with its defaults (``init_strategy="kmeans"``:
    torchgmm's own k-means, then its responsibilities init), ``convergence_tolerance=tol`` (torchgmm's
    rule is the change of the mean negative log-likelihood per point, scikit-learn's),
    ``trainer_params`` ``max_epochs=max_iter`` on the GPU (or the CPU), X in one batch. The host
    input on a GPU is copied to the device first (timed as ``transfer``): given a host tensor,
    Lightning would copy the batch again every epoch. Init and EM run inside one ``fit`` (unsplit)."""
    import time

    from torchgmm.bayes import GaussianMixture

    from arms import fitted

    for name in ("pytorch_lightning", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    covariance_type = opts.get("covariance_type", "diag")
    on_gpu = X_device is not None
    trainer = dict(max_epochs=int(opts["max_iter"]), accelerator="gpu" if on_gpu else "cpu", devices=1,
                   logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    info = {"algorithm": "materializing", "precision": "fp32", "device": "cuda" if on_gpu else "cpu",
            "init": "torchgmm kmeans (its default)"}

    def fit(X, split):
        gm = GaussianMixture(K, covariance_type=covariance_type, convergence_tolerance=float(opts["tol"]),
                             covariance_regularization=float(opts["reg_covar"]), trainer_params=dict(trainer))
        gm.fit(X)
        model = gm.model_
        return fitted(covariance_type, model.component_probs, model.means, model.covariances, int(gm.num_iter_),
                      dict(info, converged=bool(gm.converged_))), split

    def from_host():
        if not on_gpu:
            return fit(torch.from_numpy(X_host), {})
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        X = torch.from_numpy(X_host).to(X_device.device)
        torch.cuda.synchronize()
        return fit(X, {"transfer": time.perf_counter() - t0})

    fits = {"host": from_host}
    if on_gpu:
        fits["device"] = lambda: fit(X_device, {})
    return fits
