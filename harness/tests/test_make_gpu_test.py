"""`make gpu-test`: the GPU suite over pytest-xdist workers, then the portable path (each half a target of its own,
to fit one device job), logs named by date and commit; on a machine without a GPU it refuses with the reason
instead of running kernels that need one."""
import subprocess

from harness.tests.conftest import REPO


def _make(*args):
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_the_recipe_runs_both_suites_over_the_workers_into_named_logs():
    r = _make("-n", "gpu-test", "HAS_GPU=yes", "GPU_TEST_JOBS=3")
    assert r.returncode == 0, r.stderr
    suite, portable = (line for line in r.stdout.splitlines() if "-m pytest" in line)
    assert "-n 3 --dist worksteal kernels/tests gate arms/tests harness/tests/studies" in suite
    assert "TURBO_GMM_HOPPER_KERNELS=0" in portable and '-k "not _ws" kernels/tests' in r.stdout
    commit = '$(.venv/bin/python -c "from harness.env import git_commit; print(git_commit()[:7])").log'
    assert f"log=results/$dev/gpu_tests_$(date +%F)_{commit}" in r.stdout
    assert f"log=results/$dev/gpu_tests_portable_$(date +%F)_{commit}" in r.stdout


def test_each_half_is_a_target_of_its_own():
    main, portable = (_make("-n", target, "HAS_GPU=yes").stdout for target in ("gpu-test-main", "gpu-test-portable"))
    assert "kernels/tests gate arms/tests" in main and "TURBO_GMM_HOPPER_KERNELS=0" not in main
    assert "TURBO_GMM_HOPPER_KERNELS=0" in portable and "gate arms/tests" not in portable


def test_without_a_gpu_it_refuses_and_says_why():
    for target in ("gpu-test", "gpu-test-main", "gpu-test-portable"):
        r = _make(target, "HAS_GPU=")
        assert r.returncode != 0 and "has none" in r.stdout and "make test" in r.stdout, target
