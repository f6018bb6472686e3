import pytest

from turbo_gmm.dispatch import a100_rule, choose_algorithm, h200_rule, launch_config
from turbo_gmm.diag.lift import pow2_at_least_16


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


def test_unmeasured_devices_fall_back_to_the_a100_rule():
    assert choose_algorithm(256, 16, "NVIDIA A100-SXM4-80GB") == "two_pass"
    assert choose_algorithm(256, 16, "NVIDIA H200") == "one_pass"
    assert h200_rule(256, 16) and h200_rule(128, 64) and not h200_rule(256, 32) and not h200_rule(512, 16)


def test_large_k_pass_two_fills_whole_waves_on_the_h200():
    """At d <= 32 two CTAs of pass 2 fit per SM (264 resident on 132 SMs): its grid must be whole waves
    at the Table 1 shapes, or a part-empty last wave costs up to one wave's time (measured: 1M_4096_32
    pass 2 at 4 programs per SM, 2.2 waves, 29.2 ms; at 16, 8 waves, 23.5 ms)."""
    from turbo_gmm.launch import statistics_grid
    from turbo_gmm.diag.two_pass import statistics_meta

    resident = 2 * 132
    for K in (512, 1024, 4096):
        cfg = launch_config("two_pass", K, 32)
        meta = statistics_meta(cfg, K, 32, "tf32x3")
        k_tiles, n_splits = statistics_grid(K, meta["BLOCK_K"], int(cfg.programs_per_sm * 132))
        assert (k_tiles * n_splits) % resident == 0, (K, k_tiles, n_splits)


def test_pass_two_grid_never_exceeds_its_program_target():
    """Splits round down: k_tiles x splits stays within (target - k_tiles, target] whenever the
    target allows one split per tile, so a whole-waves target keeps its waves whole."""
    from turbo_gmm.launch import statistics_grid

    target = 16 * 132
    for K in range(64, 64 * 200, 64):
        k_tiles, splits = statistics_grid(K, 64, target)
        assert k_tiles == K // 64 and splits >= 1
        if k_tiles <= target:
            assert target - k_tiles < k_tiles * splits <= target, (K, k_tiles, splits)


def test_launch_config_text_names_its_fields_and_refuses_unknown_ones():
    """parse_config (the --config of harness.studies.measure and resources): every field by name, typed as
    LaunchConfig declares it; a name that is not a field (e.g. stats_by_lanes, removed with its second
    orientation) is refused with the list of fields."""
    from turbo_gmm.launch import LaunchConfig, parse_config

    cfg = parse_config("block_n=32,num_stages=1,programs_per_sm=0.5,normalizer_block_n=256,max_registers=168")
    assert cfg == LaunchConfig(block_n=32, num_stages=1, programs_per_sm=0.5, normalizer_block_n=256, max_registers=168)
    assert isinstance(cfg.block_n, int) and isinstance(cfg.programs_per_sm, float)
    assert parse_config(None) is None and parse_config("") is None
    with pytest.raises(ValueError, match="stats_by_lanes.*fields: block_n"):
        parse_config("block_n=32,stats_by_lanes=1")


def test_override_text_changes_only_its_fields_of_a_shapes_config():
    """config_fields (measure's --override): the named fields over a shape's own launch config, the rest kept."""
    import dataclasses

    from turbo_gmm.launch import config_fields

    base = launch_config("one_pass", 32, 32)
    changed = dataclasses.replace(base, **config_fields("num_stages=4,sum_tiles=64"))
    assert (changed.num_stages, changed.sum_tiles) == (4, 64) and base.sum_tiles != 64
    assert dataclasses.replace(changed, num_stages=base.num_stages, sum_tiles=base.sum_tiles) == base
    with pytest.raises(ValueError, match="stages.*fields"):
        config_fields("stages=3")
    with pytest.raises(ValueError, match="sum_tiles must be >= 0.*got -1"):
        dataclasses.replace(base, **config_fields("sum_tiles=-1"))


TABLE1_KD = [(16, 32), (32, 32), (64, 32), (128, 32), (512, 32), (1024, 32), (4096, 32), (16, 64), (16, 128),
             (32, 64), (64, 16)]


def test_fp64_rule_is_the_measured_rule_at_twice_d_pad():
    """Not measured under fp64: its float64 state is twice the bytes, so Algorithm 2 gets half the K_pad * d_pad."""
    for K, d in TABLE1_KD + [(256, 16), (128, 64), (8, 512)]:
        twice = choose_algorithm(K, 2 * pow2_at_least_16(d), "NVIDIA H200")
        assert choose_algorithm(K, d, "NVIDIA H200", precision="fp64") == twice, (K, d)
    assert choose_algorithm(256, 16, "NVIDIA H200") == "one_pass"
    assert choose_algorithm(256, 16, "NVIDIA H200", precision="fp64") == "two_pass"


@pytest.mark.parametrize("algorithm", ["one_pass", "two_pass"])
def test_fp64_tiles_are_triton_kernels_with_unbounded_float64_sums(algorithm):
    """fp64 routes to the Triton kernels (the warp-specialized ones are tf32x3), with no bound on the tiles a
    float64 running sum adds; its tiles are its own, not tf32x3's."""
    for K, d in TABLE1_KD:
        cfg = launch_config(algorithm, K, d, "fp64")
        assert cfg.sum_tiles == 0 and not cfg.warp_specialized_one_pass and not cfg.warp_specialized_pass2
        assert cfg.block_n >= 16 and cfg.block_k >= 16
    assert launch_config("one_pass", 32, 32, "fp64") != launch_config("one_pass", 32, 32)
