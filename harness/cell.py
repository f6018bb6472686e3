"""The cell spec: everything that determines one cell's result, read once from the composed config.

A cell is one arm at one shape under one protocol. :meth:`CellSpec.from_cfg` reads the composed
Hydra config once and checks every protocol setting (a :class:`SettingError` names the setting and
its allowed range); from then on the spec alone drives the cell's record name, the plan, the
worker's input, the record and the CSV row. The record name is ``<arm>__<shape>__<digest>``: the
names for people, and a digest of every field that determines the result (arm, module, numerics,
options, N, K, d, seed, n_iter, reps, reg_covar, ari_rows, the timeout, the code-affecting
environment) for the machine, so a changed setting is a different cell, never a stale record reused.

Two protocols (``protocol`` in the composed config). ``fixed_init`` (Table 1 and the studies beside it):
``n_iter`` EM iterations from the shared init, ``reps`` timed calls of the arm's ``prepare``. ``e2e``:
each arm's own ``fit`` from its own default initialization to convergence (``e2e.tol``, at most
``e2e.max_iter`` iterations, held in ``n_iter``), ``warmups`` untimed and ``reps`` timed fits per input,
the arm's ``prepare_e2e``; reps, warmups and timeout come from the arm's ``e2e`` block. ``kmeans`` (the k-means
arms, ``conf/arm/kmeans_*.yaml``, which list it in their ``protocols``): ``kmeans.iterations`` Lloyd iterations
from the shared k-means++ seeds, then the library's own fit, on data of ``data_components`` = ceil(K /
``kmeans.clusters_per_component``) components; warmups, reps, e2e_reps and timeout from the arm's ``kmeans``
block. An arm runs only under the protocols its YAML lists (``protocols``; fixed_init and e2e where it lists
none). The digest of a ``fixed_init`` cell covers exactly what it covered before the protocol field existed, so
the committed records keep their keys; an ``e2e`` cell's digest adds the protocol, tol and warmups, a ``kmeans``
cell's those and e2e_reps and data_components.

``covariance_type`` (an experiment-level setting, ``diag`` by default; ``full`` for experiment=full, and swept
beside ``diag`` by experiment=e2e): the form of every arm's covariances, its shared init (fixed_init) or its own
fit (e2e), and its gate. A ``diag`` cell's digest and record are what they were before the field existed; any
other type is added to the identity.

``cold_cache`` (``e2e.cold_cache``, protocol e2e only, false by default): the cell's worker gets empty compilation
caches, a fresh temporary folder of its own, so its first fit is a cold start (``cache_state`` "empty"). False
leaves the digest and record as they were; true is added to the identity, so one sweep
(``e2e.cold_cache=false,true``) records both states as cells of their own.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, fields
from typing import Mapping

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from turbo_gmm.datasets import validate_shape

SEED_MAX = 2**32 - 1  # the data generator mixes the seed into int64 counters
DIGEST_CHARS = 10
PROTOCOLS = ("fixed_init", "e2e", "kmeans")
ARM_PROTOCOLS = ("fixed_init", "e2e")  # what an arm runs under where its YAML lists no protocols
COVARIANCE_TYPES = ("diag", "full")


class SettingError(ValueError):
    """A protocol setting no cell can run with; the message is one line naming it and its range."""


def _value(cfg: DictConfig, path: str):
    try:
        return OmegaConf.select(cfg, path, throw_on_missing=True)
    except MissingMandatoryValue:
        raise SettingError(f"{path} is not set (??? in its config): give it on the command line, {path}=...")


def _integer(path: str, value, lo: int, hi: int | None = None) -> int:
    ok = not isinstance(value, bool) and isinstance(value, int) and value >= lo and (hi is None or value <= hi)
    if not ok:
        allowed = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        raise SettingError(f"{path}={value!r}: must be {allowed}")
    return value


def _number(path: str, value, positive: bool) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or (value <= 0 if positive else value < 0):
        raise SettingError(f"{path}={value!r}: must be a finite number {'> 0' if positive else '>= 0'}")
    return float(value)


def _text(path: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise SettingError(f"{path}={value!r}: must be a non-empty string")
    return value


INT64_MAX = 2**63 - 1  # the data generator, the libraries and the CSV readers hold sizes in int64
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+-]*")


def plain_name(path: str, value) -> str:
    """``value`` as one folder or file name under the results folder (experiment_name, device_label): letters,
    digits and ``_ . = + -``, not starting with a dot, so no ``..``, ``/`` or empty name can reach outside it."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if text is None or not _NAME.fullmatch(text) or ".." in text:
        raise SettingError(f"{path}={value!r}: must be a plain name (letters, digits, _ . = + -, not starting with "
                           "a dot, no '..' or '/'): it names a folder under results_dir")
    return text


def _sizes(shape_name: str, N, K, d) -> None:
    """N, K, d (and N*d, the elements of X) within int64, beside validate_shape's own checks."""
    for name, v in (("N", N), ("K", K), ("d", d)):
        if isinstance(v, int) and not isinstance(v, bool) and v > INT64_MAX:
            raise SettingError(f"shape {shape_name}: shape.{name}={v}: must be an integer in [1, 2**63-1] (int64)")
    if all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (N, d)) and N * d > INT64_MAX:
        raise SettingError(f"shape {shape_name}: N*d={N * d} elements of X: must be at most 2**63-1 (int64)")


def data_components(K: int, clusters_per_component: int) -> int:
    """Components of a k-means cell's data (harness/kmeans.py): K clusters, ``clusters_per_component`` each."""
    return max(1, math.ceil(K / clusters_per_component))


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "-", s)


@dataclass(frozen=True)
class CellSpec:
    experiment: str
    arm: str
    module: str
    label: str
    numerics: str
    options: tuple  # ((name, value), ...) sorted by name: the arm's resolved options
    shape: str
    regimes: tuple
    N: int
    K: int
    d: int
    seed: int
    n_iter: int
    reps: int
    reg_covar: float
    ari_rows: int
    timeout_s: float  # the arm's timeout_s times timeout_scale
    env: tuple  # ((name, value), ...) of the code-affecting variables that are set (cfg.code_env)
    protocol: str = "fixed_init"  # or "e2e" (PROTOCOLS)
    tol: float | None = None  # e2e: the convergence threshold given to every arm; None under fixed_init
    warmups: int = 1  # untimed calls before the timed ones (fixed_init: always the one warm-up call)
    covariance_type: str = "diag"  # or "full" (COVARIANCE_TYPES): the covariances every arm fits and the gate scores
    e2e_reps: int | None = None  # kmeans: timed own fits (reps: timed Lloyd runs); None under the other protocols
    data_components: int | None = None  # kmeans: components of the generated data; None: K (the other protocols)
    cold_cache: bool = False  # e2e: the worker runs with empty compilation caches (a fresh temporary folder)

    # what determines the result; experiment, labels and regimes only name and file it
    IDENTITY = ("arm", "module", "numerics", "options", "N", "K", "d", "seed", "n_iter", "reps",
                "reg_covar", "ari_rows", "timeout_s", "env")
    E2E_IDENTITY = ("protocol", "tol", "warmups")  # added to the identity of an e2e cell
    COVARIANCE_IDENTITY = ("covariance_type",)  # added to the identity of a cell whose type is not diag
    KMEANS_IDENTITY = ("e2e_reps", "data_components")  # added, beside E2E_IDENTITY, to a kmeans cell's identity
    COLD_CACHE_IDENTITY = ("cold_cache",)  # added to the identity of a cell run with empty compilation caches
    PROTOCOL_DEFAULTS = {"protocol": "fixed_init", "tol": None, "warmups": 1, "covariance_type": "diag",  # records
                         "e2e_reps": None, "data_components": None, "cold_cache": False}  # made before the fields

    @classmethod
    def from_cfg(cls, cfg: DictConfig, environ: Mapping[str, str] = os.environ) -> "CellSpec":
        """The spec of the composed config's cell; :class:`SettingError` for a setting no cell can run with."""
        shape_name = _text("shape.name", _value(cfg, "shape.name"))
        N, K, d = (_value(cfg, f"shape.{s}") for s in "NKd")
        _sizes(shape_name, N, K, d)
        try:
            validate_shape(N, K, d)
        except ValueError as e:
            raise SettingError(f"shape {shape_name}: {e}") from None
        options = _value(cfg, "arm.options")
        options = OmegaConf.to_container(options, resolve=True) if options is not None else {}
        if not isinstance(options, dict):
            raise SettingError(f"arm.options={options!r}: must be a mapping of option names to values")
        regimes = _value(cfg, "shape.regimes")
        protocol = _value(cfg, "protocol") or "fixed_init"
        if protocol not in PROTOCOLS:
            raise SettingError(f"protocol={protocol!r}: must be one of {', '.join(PROTOCOLS)}")
        covariance_type = _value(cfg, "covariance_type") or "diag"
        if covariance_type not in COVARIANCE_TYPES:
            raise SettingError(f"covariance_type={covariance_type!r}: must be one of {', '.join(COVARIANCE_TYPES)}")
        if covariance_type != "diag" and protocol == "kmeans":  # k-means has no covariances
            raise SettingError(f"covariance_type={covariance_type}: runs under protocol fixed_init or e2e only")
        arm_name = _text("arm.name", _value(cfg, "arm.name"))
        listed = _value(cfg, "arm.protocols")
        arm_protocols = tuple(listed) if listed is not None else ARM_PROTOCOLS
        if protocol not in arm_protocols:
            if protocol == "kmeans":
                raise SettingError(f"arm={arm_name} has no k-means fit: protocol=kmeans runs the k-means arms "
                                   "(conf/arm/kmeans_*.yaml)")
            hint = " (experiment=kmeans, or protocol=kmeans on the command line)" if "kmeans" in arm_protocols else ""
            raise SettingError(f"arm={arm_name} runs under protocol={' or '.join(arm_protocols)} only, not "
                               f"protocol={protocol}{hint}")
        extra = {}
        if protocol == "kmeans":  # the arm's kmeans block drives the clock (harness/PROTOCOL.md, the k-means protocol)
            driven = dict(n_iter=_integer("kmeans.iterations", _value(cfg, "kmeans.iterations"), 1),
                          reps=_integer("arm.kmeans.reps", _value(cfg, "arm.kmeans.reps"), 1),
                          warmups=_integer("arm.kmeans.warmups", _value(cfg, "arm.kmeans.warmups"), 0),
                          timeout=_number("arm.kmeans.timeout_s", _value(cfg, "arm.kmeans.timeout_s"), positive=True),
                          tol=None)
            per = _integer("kmeans.clusters_per_component", _value(cfg, "kmeans.clusters_per_component"), 1)
            extra = dict(e2e_reps=_integer("arm.kmeans.e2e_reps", _value(cfg, "arm.kmeans.e2e_reps"), 1),
                         data_components=data_components(K, per))
        elif protocol == "e2e":  # the arm's own fit: its e2e block drives the clock, else its reps and timeout
            block = "arm.e2e" if _value(cfg, "arm.e2e") is not None else "arm"
            driven = dict(n_iter=_integer("e2e.max_iter", _value(cfg, "e2e.max_iter"), 1),
                          reps=_integer(f"{block}.reps", _value(cfg, f"{block}.reps"), 1),
                          warmups=(_integer("arm.e2e.warmups", _value(cfg, "arm.e2e.warmups"), 0)
                                   if block == "arm.e2e" else 1),
                          timeout=_number(f"{block}.timeout_s", _value(cfg, f"{block}.timeout_s"), positive=True),
                          tol=_number("e2e.tol", _value(cfg, "e2e.tol"), positive=False))
            cold = _value(cfg, "e2e.cold_cache")
            if cold is not None and not isinstance(cold, bool):
                raise SettingError(f"e2e.cold_cache={cold!r}: must be true or false")
            extra = dict(cold_cache=bool(cold))
        else:
            driven = dict(n_iter=_integer("n_iter", _value(cfg, "n_iter"), 1),
                          reps=_integer("arm.reps", _value(cfg, "arm.reps"), 1), warmups=1,
                          timeout=_number("arm.timeout_s", _value(cfg, "arm.timeout_s"), positive=True), tol=None)
        return cls(
            experiment=plain_name("experiment_name", _text("experiment_name", _value(cfg, "experiment_name"))),
            arm=arm_name,
            module=_text("arm.module", _value(cfg, "arm.module")),
            label=_text("arm.label", _value(cfg, "arm.label")),
            numerics=_text("arm.numerics", _value(cfg, "arm.numerics")),
            options=tuple(sorted(options.items())),
            shape=shape_name,
            regimes=tuple(regimes) if regimes is not None else (),
            N=N, K=K, d=d,
            seed=_integer("seed", _value(cfg, "seed"), 0, SEED_MAX),
            n_iter=driven["n_iter"],
            reps=driven["reps"],
            reg_covar=_number("reg_covar", _value(cfg, "reg_covar"), positive=False),
            ari_rows=_integer("ari_rows", _value(cfg, "ari_rows"), 1),
            timeout_s=driven["timeout"] * _number("timeout_scale", _value(cfg, "timeout_scale"), positive=True),
            env=tuple((k, environ[k]) for k in sorted(_value(cfg, "code_env") or ()) if k in environ),
            protocol=protocol, tol=driven["tol"], warmups=driven["warmups"], covariance_type=covariance_type,
            **extra,
        )

    @classmethod
    def from_dict(cls, d: dict) -> "CellSpec":
        """Inverse of :meth:`as_dict` (the worker's input, a record's ``spec``); a record written before the
        protocol fields existed is a ``fixed_init`` cell."""
        names = {f.name for f in fields(cls)}
        d = {**{k: v for k, v in cls.PROTOCOL_DEFAULTS.items() if k not in d}, **d}
        if set(d) != names:
            raise ValueError(f"a cell spec has the fields {sorted(names)}, got {sorted(d)}")
        return cls(**dict(d, options=tuple(sorted(d["options"].items())), regimes=tuple(d["regimes"]),
                          env=tuple(sorted(d["env"].items()))))

    def as_dict(self) -> dict:
        """JSON-ready: options and env as mappings; a fixed_init spec without the protocol fields and a diag
        spec without covariance_type, as records were written before they existed."""
        spec = dict(asdict(self), options=dict(self.options), regimes=list(self.regimes), env=dict(self.env))
        if self.protocol == "fixed_init":
            for k in self.E2E_IDENTITY:
                del spec[k]
        if self.protocol != "kmeans":
            for k in self.KMEANS_IDENTITY:
                del spec[k]
        if self.covariance_type == "diag":
            del spec["covariance_type"]
        if not self.cold_cache:
            del spec["cold_cache"]
        return spec

    @property
    def options_dict(self) -> dict:
        return dict(self.options)

    @property
    def digest(self) -> str:
        """Stable digest of the fields that determine the result (canonical JSON, SHA-256)."""
        spec = self.as_dict()
        keys = (self.IDENTITY + (self.E2E_IDENTITY if self.protocol != "fixed_init" else ())
                + (self.KMEANS_IDENTITY if self.protocol == "kmeans" else ())
                + (self.COVARIANCE_IDENTITY if self.covariance_type != "diag" else ())
                + (self.COLD_CACHE_IDENTITY if self.cold_cache else ()))
        identity = json.dumps({k: spec[k] for k in keys}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(identity.encode()).hexdigest()[:DIGEST_CHARS]

    @property
    def key(self) -> str:
        """The record's file name (without suffix): readable names, then the digest."""
        return f"{_safe(self.arm)}__{_safe(self.shape)}__{self.digest}"

    def describe(self) -> str:
        """One line for people: the arm, the sizes and the options."""
        opts = " ".join(f"{k}={v}" for k, v in self.options)
        e2e = f", e2e to tol {self.tol:g} within {self.n_iter} iterations" if self.protocol == "e2e" else ""
        if self.protocol == "kmeans":
            e2e = (f", k-means: {self.n_iter} Lloyd iterations from the shared seeds, then its own fit; data of "
                   f"{self.data_components} component{'s' if self.data_components != 1 else ''}")
        cov = f", {self.covariance_type} covariances" if self.covariance_type != "diag" else ""
        cold = ", empty compilation caches" if self.cold_cache else ""
        return (f"{self.arm} at {self.shape} (N={self.N} K={self.K} d={self.d}{', ' + opts if opts else ''}{e2e}{cov}"
                f"{cold})")

    def row(self) -> dict:
        """The CSV columns the spec decides (the worker's report may refine algorithm and precision)."""
        opts = self.options_dict
        kmeans = {"data_components": self.data_components} if self.protocol == "kmeans" else {}
        return {**kmeans, "experiment": self.experiment, "arm": self.arm, "label": self.label, "shape": self.shape,
                "N": self.N, "K": self.K, "d": self.d, "regimes": ";".join(self.regimes), "seed": self.seed,
                "numerics": self.numerics, "algorithm": opts.get("algorithm", ""),
                "precision": opts.get("precision", self.numerics), "n_iter": self.n_iter, "reps": self.reps,
                "reg_covar": self.reg_covar, "ari_rows": self.ari_rows, "timeout_s": self.timeout_s,
                "protocol": self.protocol, "tol": self.tol, "covariance_type": self.covariance_type}
