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
"""
from __future__ import annotations

import logging

import torch

from kernels.records import Fit, Init

MEMORY = "torch"


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
    from torchgmm.bayes.gmm import GaussianMixtureModel, GaussianMixtureModelConfig
    from torchgmm.bayes.gmm.lightning_module import GaussianMixtureLightningModule

    for name in ("pytorch_lightning", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    K, d = init.means.shape
    w0 = torch.as_tensor(init.weights / init.weights.sum())
    m0 = torch.as_tensor(init.means)
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
        model = GaussianMixtureModel(GaussianMixtureModelConfig(num_components=K, num_features=d, covariance_type="diag"))
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
        return Fit(model.component_probs, model.means, model.covariances, n_iter=trainer.current_epoch, info=info)

    return run
