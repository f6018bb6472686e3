"""``KMeans``: scikit-learn's k-means estimator on the device k-means of :mod:`turbo_gmm.init.kmeans`.

The fit is ``sklearn.cluster.KMeans``'s: the same draws from ``random_state`` (k-means++ or "random" seeds, in
its order), Lloyd's iterations to its convergence rule, ``n_init`` runs with the lowest inertia kept, sample
weights throughout; beside them cuML's ``init="k-means||"`` seeding (scikit-learn has none). It runs where X
lives, on the fused kernels (float32) or torch ops (float64); the same core (:func:`turbo_gmm.init.kmeans.kmeans`)
starts ``GaussianMixture(init_params="kmeans")``."""
from __future__ import annotations

import contextlib
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, _fit_context
from sklearn.cluster import KMeans as _SkKMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import _check_sample_weight, _is_arraylike_not_scalar, check_array

from ._column_sums import non_finite_message
from ._data import fitted_input, host_or_device, output_like, training_input, upload
from .dispatch import FLOAT32_PRECISIONS, FP64, fp64_costs_nothing
from .init.kmeans import SCORE_BLOCK_BYTES, kmeans
from .init.kmeans_assign import MAX_FEATURES
from .mixture import DEVICES, data_backend

PRECISIONS = ("auto", *FLOAT32_PRECISIONS, FP64)
DEFAULT_N_INIT = 10  # n_init="auto" for init "random" or a callable (scikit-learn's)
ORIGIN_ROWS = 1024  # rows whose mean is subtracted from float64 X before its float32 copy


class KMeans(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """K-means clustering (Lloyd's algorithm) on the GPU, with scikit-learn's API.

    A drop-in for ``sklearn.cluster.KMeans``: the same parameters, methods, fitted attributes and errors, and from
    the same ``random_state`` the same seeds and iterations (to rounding). Inputs may be NumPy-like arrays, torch
    tensors or device arrays (DLPack / ``__cuda_array_interface__``); device arrays are read in place, and
    ``predict``, ``transform``, ``fit_predict`` and ``fit_transform`` answer in the input's framework and device.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    init : {"k-means++", "k-means||", "random"}, callable or array-like of shape (n_clusters, n_features), default="k-means++"
        Greedy k-means++ seeding; k-means|| (scalable k-means++, Bahmani et al. 2012; cuML's ``"k-means||"``):
        5 rounds that each sample about ``2 * n_clusters`` rows, with probabilities proportional to their
        (weighted) squared distances to the rows sampled before, then greedy k-means++ over those candidates,
        each weighted by the rows nearest to it; ``n_clusters`` rows drawn at random (with probability
        proportional to ``sample_weight``); the initial centers; or ``init(X - X.mean(0), n_clusters,
        random_state)`` giving them about the column mean, as scikit-learn calls it. k-means++ reads X once or
        twice per cluster, k-means|| about seven times in all, but each of its passes scores a round's ~2
        ``n_clusters`` candidates; its seeds' inertia was on average as low as k-means++'s in our tests.
        scikit-learn has no k-means||, so its seeds
        are not scikit-learn's; its rounds draw from a torch generator seeded by ``random_state``, so the seeds
        also depend on the device.
    n_init : "auto" or int, default="auto"
        Runs from different seeds; the lowest inertia is kept. "auto": 1 for "k-means++", "k-means||" or given
        centers, 10 for "random" or a callable.
    max_iter : int, default=300
        Lloyd iterations per run.
    tol : float, default=1e-4
        Convergence threshold on the squared center shift, relative to the mean column variance of X.
    verbose : int, default=0
        scikit-learn's progress messages.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialization.
    copy_x : bool, default=True
        Accepted for compatibility: X is never modified.
    algorithm : {"lloyd"}, default="lloyd"
        Lloyd's algorithm (scikit-learn's "elkan" is not implemented).
    device : {"auto", "cuda", "cpu"}, default="auto"
        As ``GaussianMixture``'s: "cuda" the fused kernels, "cpu" float64 torch ops, "auto" CUDA if present, else
        the Triton interpreter under ``TRITON_INTERPRET=1``, else the CPU. A device array is fitted where it is.
    precision : {"auto", "tf32x3", "ieee", "fp64"}, default="auto"
        The kernels' arithmetic: "tf32x3" or "ieee" the fused float32 kernels (float64 X is rounded to float32
        about its mean), "fp64" float64 torch ops on the device; "auto": "fp64" where N K d is small enough to
        cost what float32 does, else "tf32x3". The CPU computes in float64.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Cluster centers (X's float dtype).
    labels_ : ndarray of shape (n_samples,)
        Label of each training point (int32).
    inertia_ : float
        Sum of (sample-weighted) squared distances of the training points to their centers.
    n_iter_ : int
        Lloyd iterations of the kept run.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features, where X has string column names.
    backend_ : str
        Where Lloyd ran: "triton", "triton-interpreter" (the fused kernels), "torch-cuda" or "torch-cpu".
    precision_ : str
        "tf32x3", "ieee" or "fp64".

    See Also
    --------
    sklearn.cluster.KMeans : the reference implementation.
    turbo_gmm.GaussianMixture : whose ``init_params="kmeans"`` runs this k-means.

    Notes
    -----
    Weighted k-means++ seeding runs on torch ops (the fused seeding kernels are unweighted); k-means|| runs on
    the fused kernels, weighted or not. On the fused kernels X is float32: the centers agree with scikit-learn's
    float64 fit to float32 rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from turbo_gmm import KMeans
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=np.float64)
    >>> km = KMeans(n_clusters=2, random_state=0, device="cpu").fit(X)
    >>> km.labels_
    array([1, 1, 1, 0, 0, 0], dtype=int32)
    >>> km.predict([[0, 0], [12, 3]])
    array([1, 0], dtype=int32)
    >>> km.cluster_centers_
    array([[10.,  2.],
           [ 1.,  2.]])"""

    _parameter_constraints: dict = {  # scikit-learn's (InvalidParameterError), k-means||, Lloyd only, and the GPU's
        **_SkKMeans._parameter_constraints,
        "init": [StrOptions({"k-means++", "k-means||", "random"}), callable, "array-like"],
        "algorithm": [StrOptions({"lloyd"})],
        "device": [StrOptions(set(DEVICES))],
        "precision": [StrOptions(set(PRECISIONS))],
    }

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300, tol=1e-4, verbose=0,
                 random_state=None, copy_x=True, algorithm="lloyd", device="auto", precision="auto"):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.device = device
        self.precision = precision

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Compute k-means clustering; returns self. A failed fit leaves the estimator as it was.

        Parameters
        ----------
        X : array-like or device array of shape (n_samples, n_features)
            Training points.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the points (not used by a given or callable ``init``)."""
        self._fit_or_restore(X, sample_weight)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit, then the training labels (``labels_``) in X's framework and device."""
        return output_like(X)(self._fit_or_restore(X, sample_weight).to(torch.int32))

    def _fit_or_restore(self, X, sample_weight):
        """:meth:`_fit`, or on any error the estimator as it was."""
        state = dict(self.__dict__)
        try:
            return self._fit(X, sample_weight)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then the distances of X to the centers (as ``fit(X).transform(X)``)."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def _fit(self, X, sample_weight):
        """Fit; the training labels on the device (int64)."""
        X, tensor = host_or_device(X)
        backend, label, device = data_backend(self.device, tensor)
        X = training_input(self, X, tensor, min_samples=1)
        if tensor is not None:
            _check_finite(tensor)
        N, d = (tensor if tensor is not None else X).shape
        K = self.n_clusters
        if N < K:
            raise ValueError(f"n_samples={N} should be >= n_clusters={K}.")
        float32 = tensor.dtype == torch.float32 if tensor is not None else X.dtype == np.float32
        dtype = np.float32 if float32 else np.float64  # scikit-learn's: float32 stays, anything else is float64
        n_init = self._n_init()
        weights, scale = _checked_weights(sample_weight, N, K, dtype, self.init)
        init = self.init
        if not isinstance(init, str) and not callable(init):  # given centers, checked before X is copied
            init = self._checked_centers(init.detach().cpu().numpy() if isinstance(init, torch.Tensor) else init,
                                         d, dtype, copy=True)
        precision = FP64 if backend == "torch" else self.precision
        if precision == "auto":  # the fused kernels hold a row of at most MAX_FEATURES
            precision = FP64 if fp64_costs_nothing(N, K, d) or d > MAX_FEATURES else FLOAT32_PRECISIONS[0]
        fused = precision != FP64
        Xd, origin = _device_copy(X if tensor is None else tensor, device, torch.float32 if fused else torch.float64)
        center, variance_mean = _column_mean_variance(Xd)
        init = self._core_init(init, X if tensor is None else tensor, Xd, origin, dtype)
        if weights is not None:
            weights = torch.as_tensor(weights, device=device)
        with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
            result = kmeans(Xd, K, check_random_state(self.random_state), center, variance_mean, self.tol,
                            self.max_iter, fused, init=init, n_init=n_init, sample_weight=weights,
                            precision=precision if fused else FLOAT32_PRECISIONS[0], verbose=bool(self.verbose))
        distinct = int(torch.unique(result.labels).numel())
        if distinct < K:
            warnings.warn(f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({K}). Possibly "
                          "due to duplicate points in X.", ConvergenceWarning, stacklevel=3)
        self.cluster_centers_ = (result.centers + origin).cpu().numpy().astype(dtype)
        self.labels_ = result.labels.cpu().numpy().astype(np.int32)
        self.inertia_ = result.inertia * scale
        self.n_iter_ = result.n_iter
        self._n_features_out = K
        self.backend_ = label if fused else f"torch-{device.type}"
        self.precision_ = precision
        return result.labels

    def _n_init(self) -> int:
        """scikit-learn's n_init: "auto" is 1 for k-means++ (and k-means||) and given centers, 10 otherwise; given
        centers run once (with its RuntimeWarning where n_init asks more)."""
        init = self.init
        if self.n_init == "auto":
            n_init = 1 if (isinstance(init, str) and init in ("k-means++", "k-means||")) or (
                _is_arraylike_not_scalar(init)) else DEFAULT_N_INIT
        else:
            n_init = self.n_init
        if _is_arraylike_not_scalar(init) and n_init != 1:
            warnings.warn("Explicit initial center position passed: performing only one init in "
                          f"{type(self).__name__} instead of n_init={n_init}.", RuntimeWarning, stacklevel=4)
            n_init = 1
        return n_init

    def _core_init(self, init, X, Xd, origin, dtype):
        """``init`` for :func:`kmeans`: the method's name, or the initial centers (checked ones given, or a function
        of the random state giving them) in the coordinates of ``Xd`` (X - origin)."""
        if isinstance(init, str):
            return init
        d = Xd.shape[1]
        if not callable(init):
            return torch.as_tensor(init, dtype=torch.float64, device=Xd.device) - origin
        centered = []  # X about its column mean, made on the first call, as scikit-learn passes it

        def draw(random_state):
            if not centered:
                x = X if not isinstance(X, torch.Tensor) or X.is_floating_point() else X.double()
                mean = x.mean(0) if isinstance(x, torch.Tensor) else x.mean(axis=0)
                centered.extend([x - mean, torch.as_tensor(mean, device=Xd.device).double()])
            centers = init(centered[0], self.n_clusters, random_state=random_state)
            if isinstance(centers, torch.Tensor):
                centers = centers.detach().cpu().numpy()
            centers = self._checked_centers(centers, d, dtype, copy=False)
            return torch.as_tensor(centers, dtype=torch.float64, device=Xd.device) + centered[1] - origin
        return draw

    def _checked_centers(self, centers, d, dtype, copy):
        """Initial centers as scikit-learn checks them: a (n_clusters, n_features) array of X's dtype."""
        centers = check_array(centers, dtype=dtype, copy=copy, order="C")
        for n, what, want in ((0, "number of clusters", self.n_clusters), (1, "number of features of the data", d)):
            if centers.shape[n] != want:
                raise ValueError(f"The shape of the initial centers {centers.shape} does not match the {what} {want}.")
        return centers

    # --------------------------------------------------------------- prediction
    def predict(self, X):
        """Index of the nearest center of each sample (int32), in X's framework and device.

        Parameters
        ----------
        X : array-like or device array of shape (n_samples, n_features)"""
        return self._evaluate(X, (), torch.int32, lambda d2, lab: lab)

    def transform(self, X):
        """Euclidean distances (n_samples, n_clusters) of X to the centers, in X's framework and device.

        Parameters
        ----------
        X : array-like or device array of shape (n_samples, n_features)"""
        return self._evaluate(X, (self.n_clusters,), None, lambda d2, lab: d2.sqrt())

    def score(self, X, y=None, sample_weight=None):
        """Opposite of the (sample-weighted) k-means objective of X: minus the sum of squared distances to the
        nearest centers.

        Parameters
        ----------
        X : array-like or device array of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None"""
        N, float32, blocks, _ = self._blocks(X)
        w = None
        if sample_weight is not None:
            if isinstance(sample_weight, torch.Tensor):
                sample_weight = sample_weight.detach().cpu().numpy()
            w = _check_sample_weight(sample_weight, np.empty((N, 0)), dtype=np.float64)
        total = 0.0
        for r0, r1, d2, lab in blocks:
            nearest = d2.gather(1, lab[:, None])[:, 0]
            total += float(nearest.sum() if w is None else torch.as_tensor(w[r0:r1], device=nearest.device) @ nearest)
        return -total

    def _evaluate(self, X, shape, dtype, result):
        """Fill an array of (n_samples, *shape) from ``result(squared distances, labels)`` block by block; ``dtype``
        None: float32 where X and the centers are, else float64 (scikit-learn's)."""
        N, float32, blocks, output = self._blocks(X)
        if dtype is None:
            dtype = torch.float32 if float32 and self.cluster_centers_.dtype == np.float32 else torch.float64
        out = None
        for r0, r1, d2, lab in blocks:
            part = result(d2, lab)
            if out is None:
                out = torch.empty((N, *shape), dtype=dtype, device=part.device)
            out[r0:r1] = part
        return output(out)

    def _blocks(self, X):
        """(N, float32 X, blocks, output): blocks yields (r0, r1, squared distances (rows, K) float64, nearest
        labels) on X's device (a device array) or the fitted device; output puts results in X's framework."""
        X, tensor, output = fitted_input(self, X)
        if tensor is not None:
            _check_finite(tensor)
            device, float32 = tensor.device, tensor.dtype == torch.float32
        else:
            device, float32 = data_backend(self.device)[2], X.dtype == np.float32
        C = torch.as_tensor(self.cluster_centers_, dtype=torch.float64, device=device)
        mean = C.mean(0)  # distances about the centers' mean: offset data keeps its digits
        Y = C - mean
        y_sq = (Y * Y).sum(1)
        rows = max(1, SCORE_BLOCK_BYTES // (8 * (C.shape[0] + X.shape[1])))

        def blocks():
            for r0 in range(0, X.shape[0], rows):
                r1 = min(X.shape[0], r0 + rows)
                x = X[r0:r1].double() if tensor is not None else torch.as_tensor(
                    np.asarray(X[r0:r1], np.float64), device=device)
                x = x - mean
                score = torch.addmm(y_sq, x, Y.T, alpha=-2.0)  # ||x - c||^2 - ||x||^2 about the mean
                labels = score.argmin(1)
                yield r0, r1, score.add_((x * x).sum(1)[:, None]).clamp_min_(0.0), labels
        return X.shape[0], float32, blocks(), output

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _checked_weights(sample_weight, N, K, dtype, init):
    """(sample weights (N,) of X's dtype or None, their scale): scikit-learn's checks, non-negative, n_clusters
    positive for init="random"; equal weights give the unweighted fit, its inertia times ``scale``."""
    if sample_weight is None:
        return None, 1.0
    if isinstance(sample_weight, torch.Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    sw = _check_sample_weight(sample_weight, np.empty((N, 0), dtype), dtype=dtype, ensure_non_negative=True)
    positive = int(np.count_nonzero(sw))  # at least one: scikit-learn's check
    if isinstance(init, str) and init == "random" and positive < K:
        raise ValueError(f"init='random' draws n_clusters={K} distinct points of positive sample_weight, but "
                         f"{positive} weights are positive")
    if (sw == sw[0]).all():
        return None, float(sw[0])
    return sw, 1.0


def _check_finite(X: torch.Tensor) -> None:
    """ValueError naming the rows with NaN or infinity of a device array (scikit-learn checks host arrays)."""
    bad = torch.zeros((), dtype=torch.bool, device=X.device)
    rows = max(1, SCORE_BLOCK_BYTES // (X.element_size() * X.shape[1]))
    for r0 in range(0, X.shape[0], rows):
        bad |= ~torch.isfinite(X[r0 : r0 + rows]).all()
    if bool(bad):
        raise ValueError(non_finite_message(X))


def _device_copy(X, device: torch.device, dtype: torch.dtype):
    """(X - origin as a C-contiguous ``dtype`` tensor on ``device``, origin (d,) float64 there): origin is the mean
    of X's first rows where float64 X is rounded to float32 (so that data far from zero keeps its digits), else 0."""
    d = X.shape[1]
    float32 = X.dtype == (torch.float32 if isinstance(X, torch.Tensor) else np.float32)
    rounds = dtype == torch.float32 and not float32
    origin = torch.zeros(d, dtype=torch.float64, device=device)
    if isinstance(X, torch.Tensor):
        if rounds:
            origin = X[:ORIGIN_ROWS].double().mean(0)
        if X.dtype == dtype and not rounds:
            return X, origin
        out = torch.empty(X.shape, dtype=dtype, device=device)
        rows = max(1, SCORE_BLOCK_BYTES // (8 * d))
        for r0 in range(0, X.shape[0], rows):
            out[r0 : r0 + rows] = X[r0 : r0 + rows].double() - origin
        return out, origin
    host_origin = np.asarray(X[:ORIGIN_ROWS], np.float64).mean(0) if rounds else None
    if rounds:
        origin = torch.as_tensor(host_origin, device=device)
    return upload(X, device, host_origin, dtype), origin


def _column_mean_variance(X: torch.Tensor):
    """(column mean (d,) float64, mean of the column variances) of X, two float64 passes in row blocks."""
    N, d = X.shape
    rows = max(1, SCORE_BLOCK_BYTES // (8 * d))
    total = torch.zeros(d, dtype=torch.float64, device=X.device)
    for r0 in range(0, N, rows):
        total += X[r0 : r0 + rows].double().sum(0)
    mean = total / N
    squares = torch.zeros_like(total)
    for r0 in range(0, N, rows):
        squares += (X[r0 : r0 + rows].double() - mean).square_().sum(0)
    return mean, float((squares / N).mean())
