"""`make venv`'s GPU branch keeps the packages of the environment it is run from, when that
environment is itself a virtual environment (the H200 image's python3 is one), and makes turbo_gmm
(the repository's kernels/) importable.

An outer venv holds a small package that no other environment has; `make venv` is forced
onto its GPU branch (HAS_CUDA_TORCH=yes, no wheelhouse) with the outer venv's python, and the
inner venv it builds must import that package, as itself (sys.prefix is the inner venv). The
control: a venv made by `python -m venv --system-site-packages` alone (the branch before the
.pth) does not see it. No network: the package is a directory written into site-packages.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tests.conftest import REPO

PROBE = "turbo_gmm_outer_probe"


def _python(venv):
    return venv / "bin" / "python"


def _run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


def _site(python):
    return _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()


def _imports_probe(python):
    r = _run(python, "-c", f"import sys, {PROBE}; print({PROBE}.WHERE, sys.prefix)")
    return r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def outer(tmp_path_factory):
    if shutil.which("make") is None:
        pytest.skip("needs make")
    root = tmp_path_factory.mktemp("venvs")
    outer = root / "outer"
    r = _run(sys.executable, "-m", "venv", "--without-pip", outer)
    assert r.returncode == 0, r.stderr
    package = Path(_site(_python(outer))) / PROBE
    package.mkdir()
    (package / "__init__.py").write_text("WHERE = 'outer'\n")
    assert _imports_probe(_python(outer))[0]
    return root, outer


def test_gpu_branch_venv_sees_the_outer_venvs_packages(outer):
    root, outer_venv = outer
    inner = root / "inner"
    r = _run("make", "--no-print-directory", "-C", REPO, "venv", "HAS_CUDA_TORCH=yes",
             f"PYTHON={_python(outer_venv)}", f"VENV={inner}", f"WHEELHOUSE={root / 'no-wheelhouse'}")
    assert r.returncode == 0, r.stdout + r.stderr
    ok, out = _imports_probe(_python(inner))
    assert ok, out
    assert out.split() == ["outer", str(inner)]  # the outer package, imported by the inner interpreter
    assert "parent-environment.pth" in r.stdout


def test_gpu_branch_venv_imports_turbo_gmm_from_the_repository(outer):
    """The GPU branch links site-packages/turbo_gmm to kernels/ (no build, no network): turbo_gmm imports from
    any folder, as the repository's kernels/ (edits are seen at once), and says its version."""
    root, outer_venv = outer
    inner = root / "inner-turbo"
    r = _run("make", "--no-print-directory", "-C", REPO, "venv", "HAS_CUDA_TORCH=yes",
             f"PYTHON={_python(outer_venv)}", f"VENV={inner}", f"WHEELHOUSE={root / 'no-wheelhouse'}")
    assert r.returncode == 0, r.stdout + r.stderr
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    r = _run(_python(inner), "-c", "import turbo_gmm; print(turbo_gmm.__file__, turbo_gmm.__version__)", cwd=elsewhere)
    assert r.returncode == 0, r.stdout + r.stderr
    where, version = r.stdout.split()
    assert Path(where).resolve() == (REPO / "kernels" / "__init__.py").resolve()
    assert version == _run(sys.executable, "-c", "import turbo_gmm; print(turbo_gmm.__version__)").stdout.strip()


def test_plain_system_site_packages_venv_does_not(outer):
    """What the GPU branch did before: the base interpreter's packages only."""
    root, outer_venv = outer
    plain = root / "plain"
    assert _run(_python(outer_venv), "-m", "venv", "--without-pip", "--system-site-packages", plain).returncode == 0
    ok, out = _imports_probe(_python(plain))
    assert not ok and "No module named" in out
