"""The cell spec: one record of everything that determines a cell's result, checked when composed."""
import json
import re

import pytest
from hydra import compose, initialize_config_dir

from harness.cell import CellSpec, SettingError
from harness.results import read_record
from harness.tests.conftest import REPO


def _spec(*overrides, environ=None):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arm=pytorch", "shape=tiny_7_5", *overrides])
    return CellSpec.from_cfg(cfg, environ={} if environ is None else environ)


def test_the_key_is_readable_names_then_a_stable_digest():
    a, b = _spec(), _spec()
    assert a == b and a.key == b.key and re.fullmatch(r"pytorch__tiny_7_5__[0-9a-f]{10}", a.key)
    assert CellSpec.from_dict(json.loads(json.dumps(a.as_dict()))) == a  # what the worker and the record hold


@pytest.mark.parametrize("override", [
    "seed=1", "n_iter=3", "reg_covar=0.1", "arm.reps=2", "arm.timeout_s=5", "timeout_scale=2", "ari_rows=100",
    "shape.N=2000", "shape.K=3", "shape.d=4", "+arm.options.extra=1", "arm.numerics=tf32x3", "arm.module=arms.sklearn",
])
def test_every_setting_that_determines_the_result_changes_the_key(override):
    assert _spec(override).key != _spec().key


@pytest.mark.parametrize("override", ["experiment_name=other", "arm.label=Torch", "shape.regimes=[x]", "force=true",
                                      "device_label=elsewhere", "env_probes=false"])
def test_names_and_where_results_go_do_not(override):
    assert _spec(override).digest == _spec().digest


def test_the_code_affecting_environment_is_part_of_the_identity():
    base = _spec()
    assert _spec(environ={"TRITON_INTERPRET": "1"}).digest != base.digest
    assert _spec(environ={"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"}).digest != base.digest
    assert _spec(environ={"CUDA_VISIBLE_DEVICES": "3", "HOME": "/x"}).digest == base.digest  # which GPU, not what runs
    assert dict(_spec(environ={"TRITON_INTERPRET": "1"}).env) == {"TRITON_INTERPRET": "1"}


@pytest.mark.parametrize("override, message", [
    ("n_iter=0", "n_iter=0: must be an integer >= 1"),
    ("n_iter=-1", "n_iter=-1: must be an integer >= 1"),
    ("n_iter=abc", "n_iter='abc': must be an integer >= 1"),
    ("n_iter=2.5", "n_iter=2.5: must be an integer >= 1"),
    ("seed=abc", "seed='abc': must be an integer in [0, 4294967295]"),
    ("seed=-1", "seed=-1: must be an integer in [0, 4294967295]"),
    ("seed=true", "seed=True: must be an integer in [0, 4294967295]"),
    ("arm.reps=0", "arm.reps=0: must be an integer >= 1"),
    ("arm.timeout_s=0", "arm.timeout_s=0: must be a finite number > 0"),
    ("timeout_scale=0", "timeout_scale=0: must be a finite number > 0"),
    ("timeout_scale=-1", "timeout_scale=-1: must be a finite number > 0"),
    ("reg_covar=-1e-6", "reg_covar=-1e-06: must be a finite number >= 0"),
    ("ari_rows=0", "ari_rows=0: must be an integer >= 1"),
    ("shape.K=2000", "shape tiny_7_5: K=2000 > N=1023: a mixture needs at least one point per component"),
    ("shape=dispatch_1M", "shape.K is not set (??? in its config): give it on the command line, shape.K=..."),
])
def test_a_setting_no_cell_can_run_with_is_named_with_its_range(override, message):
    with pytest.raises(SettingError) as e:
        _spec(override)
    assert str(e.value) == message


def test_every_committed_record_loads_and_is_named_by_its_spec():
    """results/h200 after the re-keying: each record readable, its file name its spec's key."""
    paths = sorted((REPO / "results" / "h200").glob("*/cells/*.json"))
    assert len(paths) >= 229
    for path in paths:
        rec, _ = read_record(path)
        assert CellSpec.from_dict(rec["spec"]).key == path.stem == rec["cell"], path


def test_a_committed_diag_cell_keeps_its_key_and_a_full_cell_is_a_cell_of_its_own():
    """Composed today, Table 1's pytorch cell at 1M_32_32 is still the committed record's name; the same cell
    with full covariances has another key, and covariance_type=diag spelled out changes nothing."""
    table1 = _spec("experiment=table1", "shape=1M_32_32")
    assert table1.key == "pytorch__1M_32_32__470baf6294"
    assert (REPO / "results" / "h200" / "table1" / "cells" / f"{table1.key}.json").exists()
    assert "covariance_type" not in table1.as_dict() and table1.row()["covariance_type"] == "diag"
    assert _spec("covariance_type=diag").key == _spec().key
    full = _spec("covariance_type=full")
    assert full.key != _spec().key and full.as_dict()["covariance_type"] == "full"
    assert CellSpec.from_dict(json.loads(json.dumps(full.as_dict()))) == full


@pytest.mark.parametrize("override, message", [
    ("covariance_type=tied", "covariance_type='tied': must be one of diag, full"),
    ("protocol=kmeans", "covariance_type=full: runs under protocol fixed_init or e2e only"),
])
def test_a_covariance_type_no_cell_can_run_with_is_named(override, message):
    with pytest.raises(SettingError) as e:
        _spec("covariance_type=full", override)
    assert str(e.value) == message
