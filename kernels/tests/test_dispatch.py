from kernels.dispatch import a100_rule, choose_algorithm, launch_config
from kernels.lift import pow2_at_least_16


def test_padding_is_a_power_of_two_at_least_16():
    assert [pow2_at_least_16(n) for n in (1, 16, 17, 33, 100, 4096)] == [16, 16, 32, 64, 128, 4096]


def test_paper_a100_rule():
    assert a100_rule(128, 32) and a100_rule(32, 128)
    assert not a100_rule(256, 16) and not a100_rule(128, 64)


def test_every_table1_shape_gets_an_algorithm_and_a_launchable_tile():
    for K, d in [(16, 32), (32, 32), (64, 32), (128, 32), (512, 32), (1024, 32), (4096, 32), (16, 64),
                 (16, 128), (32, 64), (64, 16)]:
        alg = choose_algorithm(K, d)
        assert alg in ("one_pass", "two_pass")
        cfg = launch_config(alg, K, d)
        assert cfg.block_n >= 16 and cfg.block_k >= 16
