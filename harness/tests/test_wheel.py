"""The packaging of turbo_gmm, checked without building anything (make wheel-test and make lowest-test build,
install and fit: .ci/packaging_check.py): the wheel's package list is kernels/'s packages, the version has
one source, the licence is BSD-3-Clause, and `make test` runs the packaging checks on tests that exist."""
import ast
import importlib.util
import re
import tomllib

from harness.tests.conftest import REPO

LIBRARY_DIR = REPO / "kernels"


def _setuptools():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def _version() -> str:
    tree = ast.parse((LIBRARY_DIR / "__init__.py").read_text())
    (value,) = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", None) == "__version__" for t in n.targets)]
    return value


def _check():
    spec = importlib.util.spec_from_file_location("packaging_check", REPO / ".ci" / "packaging_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheel_packages_are_every_package_of_kernels_but_its_tests():
    """A new folder of kernels/ with an __init__.py must be added to [tool.setuptools] packages, or the wheel
    lacks it (an editable install would still find it: only make wheel-test would notice)."""
    tool = _setuptools()
    assert tool["package-dir"] == {"turbo_gmm": "kernels"}
    found = {"turbo_gmm"} | {
        "turbo_gmm." + ".".join(p.parent.relative_to(LIBRARY_DIR).parts) for p in LIBRARY_DIR.rglob("__init__.py")
        if p.parent != LIBRARY_DIR and p.parent.relative_to(LIBRARY_DIR).parts[0] not in ("tests", "docs")
        and "__pycache__" not in p.parts}
    assert sorted(tool["packages"]) == sorted(found)
    assert not (LIBRARY_DIR / "docs" / "__init__.py").exists()


def test_the_version_has_one_source():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert _setuptools()["dynamic"]["version"] == {"attr": "turbo_gmm.__version__"}
    version = _version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert re.search(rf"^## {re.escape(version)}$", (REPO / "CHANGELOG.md").read_text(), re.M)


def test_the_licence_is_bsd_3_clause():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "The turbo-gmm developers" in text
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # the expression says it


def test_make_test_runs_the_packaging_checks_on_tests_that_exist():
    make = (REPO / "Makefile").read_text()
    assert "$(MAKE) --no-print-directory wheel-test lowest-test docs" in make
    lowest = re.search(r"LOWEST_TESTS \?= (.*?)\n(?=\S)", make, re.S).group(1).replace("\\\n", " ").split()
    assert len(lowest) >= 3
    for node in lowest:
        path, _, name = node.partition("::")
        assert (REPO / path).is_file(), f"LOWEST_TESTS: {path} does not exist"
        assert re.search(rf"^def {re.escape(name)}\(", (REPO / path).read_text(), re.M), f"LOWEST_TESTS: {node}"


def test_the_lowest_versions_are_pyprojects_lower_bounds():
    pins = _check().lowest_pins()
    assert set(pins) == {"torch", "triton", "numpy", "scikit-learn", "mpmath", "scipy"}
    assert pins["torch"] == "2.13.0"  # the one CPU build here; the GPU image tests the range's 2.11
    for name in ("triton", "numpy", "scikit-learn", "mpmath"):
        assert re.fullmatch(r"\d+(\.\d+)+", pins[name]), (name, pins[name])
