"""Issue 47 (8, 9): paths stay under results_dir, sizes within int64, host OOMs are OOMs, an unwritable cells/
folder is the one-line refusal (SettingError: the CLI exits 2 with one line, tests/test_integrity.py)."""
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from harness.cell import CellSpec, SettingError
from harness.results import read_csv
from harness.runner import _device_dir, classify, run_cell
from harness.tests.conftest import PLANTED_CONF, REPO


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("override, message", [
    ("experiment_name=../../../x", "experiment_name='../../../x': must be a plain name"),
    ("experiment_name=a/b", "experiment_name='a/b': must be a plain name"),
    ("experiment_name=..", "experiment_name='..': must be a plain name"),
    ("device_label=../../../x", "device_label='../../../x': must be a plain name"),
    ("device_label=/etc", "device_label='/etc': must be a plain name"),
])
def test_names_cannot_reach_outside_results_dir(make_cfg, tmp_path, override, message):
    """experiment_name and device_label name one folder each: a path in them wrote outside results_dir."""
    results = tmp_path / "r" / "s" / "t"
    with pytest.raises(SettingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_cell(make_cfg("arm=planted_em", override, results_dir=results))
    assert _files(tmp_path) == []  # nothing written, inside results_dir or out of it


@pytest.mark.parametrize("results_dir, message", [
    ("", "results_dir='': must be a folder"),
    ("' '", "results_dir=' ': must be a folder"),
    (".", "results_dir=.: is the repository"),
    ("harness/..", "results_dir=harness/..: a relative results_dir may not climb out"),
    ("../elsewhere", "results_dir=../elsewhere: a relative results_dir may not climb out"),
    (str(REPO.parent), f"results_dir={REPO.parent}: is above the repository"),
])
def test_results_dir_is_a_folder_of_its_own(results_dir, message):
    """``results_dir=`` (empty) wrote the device folders into the repository's root."""
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"results_dir={results_dir}", "device_label=testdev"])
    with pytest.raises(SettingError) as e:
        _device_dir(cfg)
    assert str(e.value).startswith(message)


def test_a_refused_path_is_exit_2_and_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness", f"hydra.run.dir={tmp_path / 'hydra'}",
                        f"results_dir={tmp_path / 'results'}", "device_label=testdev", "experiment_name=../../x"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("error: experiment_name='../../x': must be a plain name")
    assert not (tmp_path / "results").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize("override, message", [
    ("shape.N=99999999999999999999999", "shape tiny_7_5: shape.N=99999999999999999999999: must be an integer in "
                                        "[1, 2**63-1] (int64)"),
    ("shape.d=9223372036854775808", "shape tiny_7_5: shape.d=9223372036854775808: must be an integer in "
                                    "[1, 2**63-1] (int64)"),
    ("shape.N=9223372036854775807", "shape tiny_7_5: N*d=46116860184273879035 elements of X: must be at most "
                                    "2**63-1 (int64)"),
])
def test_sizes_beyond_int64_are_refused_at_config_validation(override, message):
    """shape.N=99999999999999999999999 passed the checks and ran, recording ``fail (ERROR: ")``."""
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["shape=tiny_7_5", override])
    with pytest.raises(SettingError) as e:
        CellSpec.from_cfg(cfg)
    assert str(e.value) == message


TORCH_HOST_OOM = ("RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                  "memory: you tried to allocate 2000000000000 bytes. Error code 12 (Cannot allocate memory)")


@pytest.mark.parametrize("returncode, stderr, timed_out, status", [
    (1, "Traceback ...\n" + TORCH_HOST_OOM + "\n", False, "fail (OOM)"),  # PyTorch's host allocator
    (1, "Traceback ...\nMemoryError\n", False, "fail (OOM)"),
    (1, "terminate called after throwing an instance of 'std::bad_alloc'\n", False, "fail (OOM)"),
    (-9, "", False, "fail (OOM)"),  # SIGKILL, not from the runner: the OOM killer
    (-9, "", True, "fail (TIMEOUT)"),  # the runner's own SIGKILL at the timeout
    (-15, "", False, "fail (ERROR: killed by SIGTERM)"),
])
def test_host_allocation_failures_and_the_oom_killer_are_oom(returncode, stderr, timed_out, status):
    assert classify(returncode, stderr, timed_out) == status


def test_a_host_allocation_failure_and_a_sigkilled_worker_are_recorded_as_oom(make_cfg, tmp_path):
    """Through the runner and a real worker: X of N = 1e14 rows (2 PB, beyond the address space whatever the
    overcommit policy) cannot be allocated on the host (PyTorch raises a RuntimeError, no MemoryError), and an arm
    SIGKILLed as the OOM killer does; both were ``fail (ERROR...)``. Recorded as OOM, a rerun skips them as it
    skips every OOM."""
    host = run_cell(make_cfg("arm=planted_em", "shape=tiny_7_5", "shape.N=100000000000000"))
    killed = run_cell(make_cfg("arm=planted_sigkill", "shape=tiny_7_5"))
    assert host["status"] == "fail (OOM)" and killed["status"] == "fail (OOM)"
    assert sorted(r["status"] for r in read_csv(tmp_path / "testdev" / "adhoc.csv")) == ["fail (OOM)"] * 2
    again = run_cell(make_cfg("arm=planted_sigkill", "shape=tiny_7_5"))  # resumed: skipped, as every OOM is
    assert again["status"] == "fail (OOM)" and again["timestamp"] == killed["timestamp"]


def test_an_unwritable_cells_folder_is_the_one_line_refusal(make_cfg, tmp_path):
    """A writable device folder whose <experiment>/cells cannot be created or written gave a traceback."""
    (tmp_path / "testdev" / "adhoc").mkdir(parents=True)
    (tmp_path / "testdev" / "adhoc" / "cells").write_text("")  # a file where the folder goes
    with pytest.raises(SettingError, match=r"cells is a file, not a folder"):
        run_cell(make_cfg("arm=planted_em"))
    os.remove(tmp_path / "testdev" / "adhoc" / "cells")
    if os.geteuid() != 0:  # root writes through permissions
        (tmp_path / "testdev" / "adhoc" / "cells").mkdir()
        os.chmod(tmp_path / "testdev" / "adhoc" / "cells", 0o500)
        try:
            with pytest.raises(SettingError, match="cannot create or write"):
                run_cell(make_cfg("arm=planted_em"))
        finally:
            os.chmod(tmp_path / "testdev" / "adhoc" / "cells", 0o700)


def test_an_unwritable_cells_folder_is_exit_2_through_the_cli(tmp_path):
    (tmp_path / "results" / "testdev" / "adhoc").mkdir(parents=True)
    (tmp_path / "results" / "testdev" / "adhoc" / "cells").write_text("")
    p = subprocess.run([sys.executable, "-m", "harness", f"hydra.run.dir={tmp_path / 'hydra'}",
                        f"hydra.searchpath=[file://{PLANTED_CONF}]", "arm=planted_em",
                        f"results_dir={tmp_path / 'results'}", "device_label=testdev"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith(f"error: results_dir={tmp_path / 'results'}: ") and "cells is a file" in line
