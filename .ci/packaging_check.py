#!/usr/bin/env python3
"""The packaging checks of `make test` (`make wheel-test`, `make lowest-test`), each in fresh virtual
environments under a new folder of ``--work`` (outside the repository), removed when the check passes.

``wheel``: builds the sdist and, from it, the wheel of this tree (``python -m build`` on a copy of the
files git does not ignore); checks that the sdist holds the library's sources only, and that the wheel
holds one top-level package, ``turbo_gmm``, made of exactly the modules of ``kernels/`` outside
``kernels/tests/`` and ``kernels/docs/``, with the version of ``turbo_gmm.__version__``, the licence and
the dependencies of pyproject.toml in its metadata. Then installs the wheel,
not editable, with constraints.txt into a fresh venv and, from a folder outside the repository, fits
iris with ``turbo_gmm.GaussianMixture`` on the CPU (the torch fallback, then the Triton kernels in the
interpreter) against scikit-learn's ``GaussianMixture``. Then installs PyPI's ``kernels`` beside it:
``import kernels`` must be PyPI's and turbo_gmm must still import and fit.

``lowest``: a fresh venv with the lower bound of every dependency of pyproject.toml pinned (torch
excepted: 2.13.0, the one CPU build here; the GPU image tests 2.11) and scipy at LOWEST_SCIPY, the
rest of constraints.txt unchanged, turbo_gmm installed editable with its [test] extra; checks that pip
installed exactly those versions, then runs the given library tests with TRITON_INTERPRET=1.
"""
from __future__ import annotations

import argparse
import ast
import email.parser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LIBRARY_DIR = REPO / "kernels"
NOT_SHIPPED = ("tests", "docs")  # folders of kernels/ that stay out of the wheel
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "kernels")
SDIST_TOPS = {"PKG-INFO", "pyproject.toml", "README.md", "LICENSE", "setup.cfg", "kernels", "turbo_gmm.egg-info"}
CONSTRAINTS = REPO / "constraints.txt"
LOWEST_TORCH = "2.13.0"  # the only CPU build of torch on this machine (pyproject.toml's range starts at 2.11)
LOWEST_SCIPY = "1.9.3"  # scikit-learn's dependency: the oldest scipy tested with the lowest scikit-learn
PYPI_KERNELS = "kernels==0.19.1"  # PyPI's `kernels` (Hugging Face), the name of our source folder

FIT = r"""
import json, os, sys
from pathlib import Path

import turbo_gmm
from turbo_gmm import GaussianMixture

repo, mode = Path(sys.argv[1]), sys.argv[2]
where = Path(turbo_gmm.__file__).resolve()
assert Path(sys.prefix).resolve() in where.parents and repo not in where.parents, where
assert not (Path.cwd() / "kernels").exists()

from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture as SkGaussianMixture

X = load_iris().data
kw = dict(n_components=3, random_state=0) if mode == "cpu" else dict(n_components=3, covariance_type="diag",
                                                                       random_state=0)
ours, theirs = GaussianMixture(**kw).fit(X), SkGaussianMixture(**kw).fit(X)
backend = {"cpu": "torch-cpu", "interpreter": "triton-interpreter"}[mode]
assert ours.backend_ == backend, ours.backend_
ari = adjusted_rand_score(theirs.predict(X), ours.predict(X))
rel = abs(ours.lower_bound_ - theirs.lower_bound_) / abs(theirs.lower_bound_)
assert ari > 0.999 and ours.n_iter_ == theirs.n_iter_, (ari, ours.n_iter_, theirs.n_iter_)
assert rel < (1e-9 if mode == "cpu" else 1e-5), rel
print(json.dumps({"turbo_gmm": turbo_gmm.__version__, "from": str(where.parent), "backend": ours.backend_,
                  "ari": round(ari, 6), "lower_bound": ours.lower_bound_, "sklearn_lower_bound": theirs.lower_bound_,
                  "n_iter": ours.n_iter_}))
"""

PYPI_KERNELS_IS_PYPIS = r"""
import importlib
import sys
from importlib import metadata
from pathlib import Path

kernels = importlib.import_module("kernels")  # PyPI's package of that name, installed beside turbo_gmm

where = Path(kernels.__file__).resolve()
files = {str(f) for f in metadata.distribution("kernels").files}
assert Path(sys.prefix).resolve() in where.parents and "kernels/__init__.py" in files, where
assert hasattr(kernels, "get_kernel"), sorted(vars(kernels))
print(f"import kernels: PyPI's kernels {metadata.version('kernels')} from {where.parent}")
"""


def log(msg: str) -> None:
    print(f"[packaging_check] {msg}", flush=True)


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def clean_env(**extra: str) -> dict:
    """The environment of a command in a fresh venv: no PYTHONPATH, no outer venv, no Triton mode."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TRITON_INTERPRET")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


def fresh_venv(path: Path) -> Path:
    run([sys.executable, "-m", "venv", path])
    return path / "bin" / "python"


def pip(python: Path, *args) -> None:
    run([python, "-m", "pip", "install", "-q", *args], env=clean_env())


def library_version() -> str:
    tree = ast.parse((LIBRARY_DIR / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return node.value.value
    raise SystemExit("kernels/__init__.py has no __version__")


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def expected_modules() -> set[str]:
    """turbo_gmm/<path> for every .py of kernels/ outside tests/ and docs/ (and the build outputs there)."""
    out = set()
    for p in LIBRARY_DIR.rglob("*.py"):
        rel = p.relative_to(LIBRARY_DIR)
        if rel.parts[0] in NOT_SHIPPED or "__pycache__" in rel.parts:
            continue
        out.add("turbo_gmm/" + rel.as_posix())
    return out


def check_wheel(wheel: Path) -> None:
    version = library_version()
    names = [n for n in zipfile.ZipFile(wheel).namelist() if not n.endswith("/")]
    tops = {n.split("/")[0] for n in names}
    dist_info = f"turbo_gmm-{version}.dist-info"
    assert tops == {"turbo_gmm", dist_info}, f"top-level entries of the wheel: {sorted(tops)}"
    package = {n for n in names if n.startswith("turbo_gmm/")}
    bad = sorted(n for n in package if set(n.split("/")[1:-1]) & set(NOT_SHIPPED))
    assert not bad, f"tests or docs in the wheel: {bad}"
    missing, extra = sorted(expected_modules() - package), sorted(package - expected_modules())
    assert not missing, (f"modules of kernels/ missing from the wheel: {missing} (a new subpackage? "
                         "add it to [tool.setuptools] packages in pyproject.toml; a folder needs __init__.py)")
    assert not extra, f"files in the wheel that are not modules of kernels/: {extra}"
    meta = email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode())
    assert meta["Name"] == "turbo-gmm" and meta["Version"] == version, (meta["Name"], meta["Version"])
    assert meta["License-Expression"] == "BSD-3-Clause", meta["License-Expression"]
    assert f"{dist_info}/licenses/LICENSE" in names, "LICENSE is not in the wheel"
    requires = {str(Requirement(r)) for r in meta.get_all("Requires-Dist") if "extra ==" not in r}
    declared = {str(Requirement(r)) for r in pyproject()["dependencies"]}
    assert requires == declared, (requires, declared)
    log(f"{wheel.name}: {len(package)} files, one package turbo_gmm ({len({n.rsplit('/', 1)[0] for n in package})}"
        f" folders), no tests/ or docs/; version {version}, BSD-3-Clause, Requires-Dist = pyproject's dependencies")


def fit_from_outside(python: Path, where: Path) -> None:
    for mode, extra in (("cpu", {}), ("interpreter", {"TRITON_INTERPRET": "1"})):
        out = subprocess.run([python, "-c", FIT, str(REPO), mode], cwd=where, env=clean_env(**extra),
                             capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"turbo_gmm fit ({mode}) failed in {where}:\n{out.stdout}{out.stderr}")
        log(f"iris, GaussianMixture ({mode}) against scikit-learn's: {out.stdout.strip()}")


def source_tree(work: Path) -> Path:
    """What the build reads (pyproject.toml, README.md, LICENSE and kernels/), as git sees the working tree:
    tracked and new files, not ignored ones. A build in the repository itself would also read what earlier
    builds left there (setuptools takes an old turbo_gmm.egg-info/SOURCES.txt into the sdist)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *BUILD_INPUTS], cwd=REPO,
                            capture_output=True, text=True)
    if listed.returncode:  # not a git checkout (an unpacked archive): the folder as it is
        return REPO
    src = work / "src"
    for name in filter(None, listed.stdout.split("\0")):
        if (REPO / name).is_file():  # a tracked file deleted in the working tree is left out
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    return src


def check_sdist(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        tops = {Path(n).parts[1] for n in tar.getnames() if len(Path(n).parts) > 1}
    assert tops <= SDIST_TOPS, f"the sdist holds {sorted(tops - SDIST_TOPS)}"


def wheel(work: Path) -> None:
    t0 = time.monotonic()
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, source_tree(work)], env=clean_env(),
        stdout=subprocess.DEVNULL)
    (whl,), (sdist,) = dist.glob("*.whl"), dist.glob("*.tar.gz")
    t_build = time.monotonic() - t0
    log(f"built {sdist.name} and, from it, {whl.name} in {t_build:.0f} s")
    check_sdist(sdist)
    check_wheel(whl)
    t1 = time.monotonic()
    python = fresh_venv(work / "venv-wheel")
    pip(python, "-c", CONSTRAINTS, whl)
    t_install = time.monotonic() - t1
    outside = work / "outside"
    outside.mkdir()
    fit_from_outside(python, outside)
    pip(python, "-c", CONSTRAINTS, PYPI_KERNELS)
    out = subprocess.run([python, "-c", PYPI_KERNELS_IS_PYPIS], cwd=outside, env=clean_env(), capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"PyPI's kernels beside turbo_gmm:\n{out.stdout}{out.stderr}")
    log(out.stdout.strip())
    fit_from_outside(python, outside)
    log(f"wheel-test passed in {time.monotonic() - t0:.0f} s (build {t_build:.0f} s, venv + install {t_install:.0f} s)")


def lowest_pins() -> dict[str, str]:
    """name -> version: the lower bound (>=) of every dependency of pyproject.toml, torch and scipy as above."""
    pins = {}
    for spec in pyproject()["dependencies"]:
        req = Requirement(spec)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{spec}: a dependency needs one lower bound (>=)"
        pins[req.name] = lows[0]
    pins["torch"] = LOWEST_TORCH
    pins["scipy"] = LOWEST_SCIPY
    return pins


def lowest(work: Path, tests: list[str]) -> None:
    t0 = time.monotonic()
    pins = lowest_pins()
    norm = lambda name: name.lower().replace("_", "-")  # noqa: E731
    kept = [line for line in CONSTRAINTS.read_text().splitlines()
            if line.strip() and not line.startswith("#") and norm(line.split("==")[0]) not in pins]
    constraints = work / "lowest-constraints.txt"
    constraints.write_text("\n".join(kept + [f"{n}=={v}" for n, v in pins.items()]) + "\n")
    log("lowest versions: " + ", ".join(f"{n}=={v}" for n, v in pins.items()))
    python = fresh_venv(work / "venv-lowest")
    pip(python, "-c", constraints, "-e", f"{REPO}[test]")
    t_install = time.monotonic() - t0
    got = json.loads(subprocess.run(
        [python, "-c", "import json, sys; from importlib.metadata import version; "
                       "print(json.dumps({n: version(n) for n in sys.argv[1:]}))", *pins],
        check=True, capture_output=True, text=True, env=clean_env()).stdout)
    wrong = {n: v for n, v in got.items() if Version(Version(v).public) != Version(pins[n])}  # 3.6.0 is 3.6, 2.13.0+cpu 2.13.0
    assert not wrong, f"pip installed other versions than the lower bounds: {wrong}"
    log("installed: " + ", ".join(f"{n} {v}" for n, v in got.items()))
    run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", *tests], cwd=REPO,
        env=clean_env(TRITON_INTERPRET="1"))
    log(f"lowest-test passed in {time.monotonic() - t0:.0f} s (venv + install {t_install:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("check", choices=["wheel", "lowest"])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "turbo-gmm-packaging",
                        help="parent of the check's own new folder (outside the repository)")
    parser.add_argument("tests", nargs="*", help="lowest: the pytest node ids to run")
    args = parser.parse_intermixed_args()
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{args.check}-", dir=args.work)).resolve()
    assert REPO not in work.parents, f"--work must be outside the repository: {work}"
    if args.check == "lowest" and not args.tests:
        parser.error("lowest: name the tests to run")
    try:
        wheel(work) if args.check == "wheel" else lowest(work, args.tests)
    except BaseException:
        log(f"FAILED; its venvs are kept in {work}")
        raise
    t0 = time.monotonic()
    shutil.rmtree(work)
    log(f"removed {work} in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
