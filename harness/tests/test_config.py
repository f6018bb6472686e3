"""Config composition: the paper's sixteen shapes, every arm, every experiment; bad input."""
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from harness.cell import CellSpec
from harness.tests.conftest import REPO

PAPER_SHAPES = {  # Table 1 of the paper: name -> (N, K, d)
    "20K_16_32": (20_000, 16, 32), "20K_32_32": (20_000, 32, 32), "20K_64_32": (20_000, 64, 32),
    "1M_32_32": (1_000_000, 32, 32), "1M_128_32": (1_000_000, 128, 32), "1M_512_32": (1_000_000, 512, 32),
    "1M_1024_32": (1_000_000, 1024, 32), "1M_4096_32": (1_000_000, 4096, 32),
    "4M_16_64": (4_000_000, 16, 64), "4M_16_128": (4_000_000, 16, 128), "4M_32_32": (4_000_000, 32, 32),
    "4M_32_64": (4_000_000, 32, 64), "4M_64_16": (4_000_000, 64, 16), "4M_64_32": (4_000_000, 64, 32),
    "10M_32_32": (10_000_000, 32, 32), "20M_32_32": (20_000_000, 32, 32),
}
REGIMES = {
    "small_N": {"20K_16_32", "20K_32_32", "20K_64_32"},
    "large_K": {"1M_32_32", "1M_128_32", "1M_512_32", "1M_1024_32", "1M_4096_32"},
    "K_d": {"4M_16_64", "4M_16_128", "4M_32_32", "4M_32_64", "4M_64_16", "4M_64_32"},
    "large_N": {"1M_32_32", "10M_32_32", "20M_32_32"},
}
ARMS = ["turbo_gmm", "turbo_gmm_fp64", "flash_gmm", "flash_gmm_bf16", "cuvs", "pytorch", "sklearn", "gmmx", "torchgmm", "pomegranate"]


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


@pytest.mark.parametrize("name", sorted(PAPER_SHAPES))
def test_paper_shape_sizes_are_exact(name):
    s = _compose(f"shape={name}").shape
    assert (s.name, s.N, s.K, s.d) == (name, *PAPER_SHAPES[name])


def test_regime_tags_match_the_paper():
    tags = {}
    for name in PAPER_SHAPES:
        for r in _compose(f"shape={name}").shape.regimes:
            tags.setdefault(r, set()).add(name)
    assert tags == REGIMES
    assert sum(len(v) for v in tags.values()) == 17  # Figure 1's seventeen bar groups


@pytest.mark.parametrize("name", ARMS)
def test_every_arm_config_names_its_module(name):
    a = _compose(f"arm={name}").arm
    assert a.name == name and a.module.startswith("arms.")
    assert a.numerics in {"tf32x3", "fp32", "bf16", "fp64"}
    assert a.reps == (5 if name == "cuvs" else 3) and a.timeout_s > 0 and "options" in a
    assert a.label and isinstance(OmegaConf.to_container(a.options), dict)


ABLATION_RUNGS = ["ablation_a1", "ablation_a2", "ablation_a3", "ablation_a4"]  # paper §5.4, not Table 1 arms
E2E_ONLY_ARMS = ["turbo_gmm_sklearn_init"]  # Table 1's turbo_gmm under the fixed init; differs only end to end
KMEANS_ARMS = ["kmeans_turbo_gmm", "kmeans_sklearn", "kmeans_flash_kmeans", "kmeans_cuvs", "kmeans_faiss"]  # protocol kmeans


def test_arm_files_are_exactly_the_table_arms_the_ablation_rungs_the_e2e_variant_and_the_kmeans_arms():
    assert sorted(p.stem for p in (REPO / "conf" / "arm").glob("*.yaml")) == sorted(
        ARMS + ABLATION_RUNGS + E2E_ONLY_ARMS + KMEANS_ARMS)
    order = list(OmegaConf.load(REPO / "conf" / "config.yaml").arm_order)
    assert [a for a in order if a not in E2E_ONLY_ARMS + KMEANS_ARMS] == ARMS and set(E2E_ONLY_ARMS) <= set(order)
    assert order[-len(KMEANS_ARMS):] == KMEANS_ARMS
    for arm in KMEANS_ARMS:  # they run under protocol kmeans only (harness/tests/test_kmeans_experiment.py)
        assert list(_compose(f"arm={arm}").arm.protocols) == ["kmeans"]
    e2e = _compose("experiment=e2e").hydra.sweeper.params.arm.split(",")
    assert set(E2E_ONLY_ARMS) <= set(e2e) and set(e2e) <= set(order)


def test_table1_sweeps_every_shape_and_arm():
    c = _compose("experiment=table1")
    params = c.hydra.sweeper.params
    assert c.experiment_name == "table1" and c.hydra.mode.name == "MULTIRUN"
    assert params.shape.split(",") == list(PAPER_SHAPES) and params.arm.split(",") == ARMS


def test_smoke_uses_cpu_capable_arms_on_small_shapes():
    c = _compose("experiment=smoke")
    assert set(c.hydra.sweeper.params.arm.split(",")) == {"turbo_gmm", "pytorch", "sklearn", "gmmx", "torchgmm", "pomegranate"}
    for s in c.hydra.sweeper.params.shape.split(","):
        assert _compose(f"shape={s}").shape.N <= 20_000


def test_dispatch_sweeps_K_d_and_algorithm_on_1M():
    c = _compose("experiment=dispatch")
    p = c.hydra.sweeper.params
    assert (c.arm.name, c.shape.N, c.experiment_name) == ("turbo_gmm", 1_000_000, "dispatch")
    assert p["shape.K"].split(",") == ["16", "32", "64", "128", "256", "512", "1024"]
    assert p["shape.d"].split(",") == ["16", "32", "64", "128"]
    assert p["arm.options.algorithm"].split(",") == ["one_pass", "two_pass"]


@pytest.mark.parametrize("path", sorted((REPO / "conf" / "experiment").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_experiment_composes_and_names_its_csv(path):
    c = _compose(f"experiment={path.stem}")
    assert c.experiment_name == path.stem and c.hydra.sweeper.params


def test_ablation_runs_four_rungs_on_the_six_K_d_shapes_and_d128_control_its_four_dataflows():
    p = _compose("experiment=ablation").hydra.sweeper.params
    assert p.arm.split(",") == ABLATION_RUNGS
    assert p.shape.split(",") == ["4M_16_64", "4M_16_128", "4M_32_32", "4M_32_64", "4M_64_16", "4M_64_32"]
    for rung in ABLATION_RUNGS:
        assert _compose(f"arm={rung}").arm.reps == 5
    p = _compose("experiment=d128_control").hydra.sweeper.params
    assert p.shape == "4M_16_128" and p.arm.split(",") == ["ablation_a4", "flash_gmm", "ablation_a3", "ablation_a1"]
    assert _compose("arm=flash_gmm").arm.options.autotune == "widened"


def test_d128_published_is_one_flash_gmm_cell_with_the_published_list():
    p = _compose("experiment=d128_published").hydra.sweeper.params
    assert (p.shape, p.arm, p["arm.options.autotune"]) == ("4M_16_128", "flash_gmm", "published")
    cfg = _compose("experiment=d128_published", "shape=4M_16_128", "arm=flash_gmm", "arm.options.autotune=published")
    assert cfg.experiment_name == "d128_published" and cfg.arm.options.autotune == "published"
    published, widened = CellSpec.from_cfg(cfg), CellSpec.from_cfg(_compose("shape=4M_16_128", "arm=flash_gmm"))
    assert published.options_dict["autotune"] == "published" and widened.options_dict["autotune"] == "widened"
    assert published.key.startswith("flash_gmm__4M_16_128__") and published.digest != widened.digest


def test_unknown_arm_lists_the_valid_names():
    with pytest.raises(MissingConfigException) as e:
        _compose("arm=no_such_arm")
    for name in ARMS:
        assert name in str(e.value)


def test_unknown_shape_lists_the_valid_names():
    with pytest.raises(MissingConfigException) as e:
        _compose("shape=3M_3_3")
    assert "1M_4096_32" in str(e.value) and "20K_16_32" in str(e.value)


@pytest.mark.parametrize("override, message", [
    ("shape.K=2000", "K=2000 > N=1023"),
    ("shape.d=0", "d must be >= 1"),
    ("shape.N=0", "N must be >= 1"),
    ("shape.N=1.5", "N must be an integer"),
    ("shape.K=seven", "K must be an integer"),
])
def test_bad_sizes_fail_before_any_work(tmp_path, override, message):
    p = subprocess.run([sys.executable, "-m", "harness", "shape=tiny_7_5", override, f"results_dir={tmp_path}"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and message in p.stderr
    assert not any(tmp_path.iterdir())  # nothing written, no worker started
