"""pyproject.toml gives ranges, constraints.txt the exact versions, and environment.yml and the Makefile
take the same exact versions."""
import re
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from harness.tests.conftest import REPO

LIBRARY_IMPORTS = {"torch", "triton", "numpy", "scikit-learn", "mpmath"}  # what kernels/ imports (not its tests)


def _name(req: str) -> str:
    return re.split(r"[=<>!~ ;\[]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject():
    p = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {g: list(reqs) for g, reqs in p["optional-dependencies"].items()}
    return p["dependencies"], groups


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*==[0-9][0-9A-Za-z.+]*", line), f"not name==version: {line}"
            name, version = line.split("==")
            assert name not in pins, f"pinned twice: {name}"
            pins[name] = version
    return pins


def test_the_library_depends_on_what_it_imports_as_ranges():
    core, _ = _pyproject()
    assert {_name(r) for r in core} == LIBRARY_IMPORTS
    for req in map(Requirement, core):
        ops = sorted(s.operator for s in req.specifier)
        assert ops == ["<", ">="], f"{req}: a range, a lower bound (>=) and an upper bound (<)"


def test_every_requirement_is_a_range_and_every_one_is_pinned():
    core, groups = _pyproject()
    pins = _constraints()
    for req in map(Requirement, core + [r for reqs in groups.values() for r in reqs]):
        assert not any(s.operator == "==" for s in req.specifier), f"{req}: exact pins go to constraints.txt"
        assert req.name.lower() in pins, f"{req.name} has no pin in constraints.txt"
        assert req.specifier.contains(Version(pins[req.name.lower()])), f"{req} excludes its pin {pins[req.name]}"


def test_the_benchmark_stack_is_in_extras_not_in_the_library():
    core, groups = _pyproject()
    assert {"bench", "arms", "torchgmm", "launchers", "test", "docs"} <= set(groups)
    extras = {_name(r) for reqs in groups.values() for r in reqs}
    for name in ("pandas", "matplotlib", "hydra-core", "omegaconf", "pyyaml", "psutil", "nvidia-ml-py", "jax",
                 "pytest", "sphinx", "numpydoc"):
        assert name in extras and name not in {_name(r) for r in core}, name


def test_conda_pins_equal_the_constraints():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = _constraints()
    tg = f"torchgmm=={pins.pop('torchgmm')}"  # installed with --no-deps, after the environment
    assert sorted(pip) == sorted(f"{n}=={v}" for n, v in pins.items())
    assert f"python={env['dependencies'][0].split('=')[1]}" == "python=3.11"
    assert f"pip install --no-deps {tg}" in (REPO / "environment.yml").read_text()


def test_ci_runs_torch_2_13_cpu_and_the_range_holds_the_gpu_images_2_11():
    pins = _constraints()
    assert pins["torch"] == "2.13.0"
    torch = next(Requirement(r) for r in _pyproject()[0] if _name(r) == "torch")
    assert torch.specifier.contains("2.11.0") and torch.specifier.contains("2.13.0")


def test_make_venv_installs_with_the_constraints_file():
    make = (REPO / "Makefile").read_text()
    assert "CONSTRAINTS := constraints.txt" in make
    assert "pip install -c $(CONSTRAINTS) -e '.[bench,arms,launchers,test,docs]'" in make
    assert "pip install -c $(CONSTRAINTS) --no-deps $(TORCHGMM)" in make
    assert "TORCHGMM := $(call pin,torchgmm)" in make


def test_offline_wheel_list_takes_its_pins_from_the_constraints():
    pins = _constraints()
    make = (REPO / "Makefile").read_text()
    for var in ("WHEELS_MIN", "WHEELS_ALL"):
        body = re.search(rf"{var} := (.*?)\n(?=\S)", make, re.S).group(1).replace("\\\n", " ")
        names = re.search(r"\$\(foreach p,(.*?),\$\(call pin,\$\(p\)\)\)", body, re.S).group(1).split()
        assert names, var
        for name in names:
            assert name in pins, f"{var}: {name} has no pin in constraints.txt"
        assert "==" not in body, f"{var}: versions come from constraints.txt"
