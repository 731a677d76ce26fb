"""The suite profile record: one per smoke, quick and full, holding what 15 tables held."""

import re
from pathlib import Path

import pytest

from reviewkit.common.errors import UsageError
from reviewkit.suite import profiles
from reviewkit.suite.profiles import SUITE_PROFILE_NAMES, SUITE_PROFILES, suite_profile

MIB = 1 << 20
# The pre-refactor tables, by the module and name they had, as literals: the record must hold
# the same values (the refactor changed where they live, not what they are).
OLD_TABLES = {
    "measure/calibration.py GEMM_SIZES": ("calibration_gemm_sizes", {
        "smoke": (128, 256, 512),
        "quick": (256, 384, 512, 768, 1024, 1536, 2048),
        "full": (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)}),
    "measure/calibration.py CONV_SHAPES": ("calibration_conv_shapes", {
        "smoke": ((64, 28),), "quick": ((128, 28), (256, 14)),
        "full": ((128, 56), (256, 28), (512, 14))}),
    "measure/calibration.py TRIALS": ("calibration_trials", {"smoke": 3, "quick": 9, "full": 15}),
    "measure/calibration.py STREAM_BYTES_PER_CALL": ("stream_bytes_per_call", {
        "smoke": 8 << 20, "quick": 32 << 20, "full": 64 << 20}),
    "measure/calibration.py DRAM_COPY_MIN_BYTES": ("dram_copy_min_bytes", {
        "smoke": 32 << 20, "quick": 256 << 20, "full": 512 << 20}),
    "measure/rounds.py DEFAULT_ROUNDS": ("rounds", {"smoke": 2, "quick": 5, "full": 10}),
    "measure/ab.py AB_DEFAULT_ROUNDS": ("ab_rounds", {"smoke": 2, "quick": 10, "full": 10}),
    "measure/ab.py AB_MIN_TIME_S": ("ab_min_time_s", {"smoke": 0.02, "quick": 1.5, "full": 5.0}),
    "measure/ab.py AB_MIN_SAMPLES": ("ab_min_samples", {"smoke": 5, "quick": 60, "full": 200}),
    "measure/soak.py WINDOW_S": ("soak_window_s", {"smoke": 2.0, "quick": 60.0, "full": 600.0}),
    "suite/collectives.py messages' tokens": ("collective_tokens", {
        "smoke": 16, "quick": 512, "full": 2048}),
    "suite/collectives.py LINK_MESSAGE_BYTES": ("link_message_bytes", {
        "smoke": 4 * MIB, "quick": 64 * MIB, "full": 256 * MIB}),
}  # fmt: skip
# measure/runner.py POLICIES and measure/overhead.py FLOOR_POLICIES, field by field:
# (warmup_calls, warmup_s, min_samples, min_time_s, max_samples, budget_s, warmup_budget_s)
OLD_POLICIES = {
    "smoke": (1, 0.0, 5, 0.01, 200, 0.5, None),
    "quick": (2, 0.02, 20, 0.2, 1000, 3.0, None),
    "full": (3, 0.1, 50, 1.0, 5000, 15.0, None),
}
OLD_FLOOR_POLICY = (3, 0.002, 40, 0.005, 2000, 1.25, 1.0)
OLD_FLOOR_POLICIES = {
    "smoke": (2, 0.0, 10, 0.0, 200, 0.5, 0.4), "quick": OLD_FLOOR_POLICY, "full": OLD_FLOOR_POLICY
}
# evidence/loadgen.py VALIDITY: (min_duration_s, min_queries, max_level_s)
OLD_VALIDITY = {"smoke": (0.05, 20, 2.0), "quick": (1.0, 100, 60.0), "full": (10.0, 1000, 600.0)}
# suite/workloads.py PROFILE_SHAPES: (seqs, batches, tokens, model_layers, model_shapes,
# conv_stages, smoke)
OLD_SHAPES = {
    "smoke": ((16, 32), (1, 2), 64, 2, ((1, 32), (1, 8), (4, 8)), ("stage3",), True),
    "quick": ((128, 512), (1, 4), 512, 2, ((1, 256), (1, 64), (4, 64)), ("stage1", "stage3"),
              False),
    "full": ((128, 512, 2048), (1, 4, 16), 2048, 4, ((1, 1024), (1, 256), (4, 256)),
             ("stage1", "stage2", "stage3", "stage4"), False),
}  # fmt: skip


def _policy(p) -> tuple:
    return (p.warmup_calls, p.warmup_s, p.min_samples, p.min_time_s, p.max_samples, p.budget_s,
            p.warmup_budget_s)  # fmt: skip


@pytest.mark.parametrize("table", sorted(OLD_TABLES))
def test_the_record_holds_the_old_tables_values(table):
    field, values = OLD_TABLES[table]
    assert {p.name: getattr(p, field) for p in SUITE_PROFILES} == values


def test_the_record_holds_the_old_policies_validity_and_shapes():
    for p in SUITE_PROFILES:
        assert _policy(p.sampling) == OLD_POLICIES[p.name]
        assert _policy(p.floor_sampling) == OLD_FLOOR_POLICIES[p.name]
        v = p.sweep_validity
        assert (v.min_duration_s, v.min_queries, v.max_level_s) == OLD_VALIDITY[p.name]
        s = p.shapes
        assert (s.seqs, s.batches, s.tokens, s.model_layers, s.model_shapes, s.conv_stages,
                s.smoke) == OLD_SHAPES[p.name]  # fmt: skip


def test_names_in_thoroughness_order_and_the_default():
    assert SUITE_PROFILE_NAMES == ("smoke", "quick", "full")
    assert profiles.DEFAULT_SUITE_PROFILE == "quick"
    assert [suite_profile(n) for n in SUITE_PROFILE_NAMES] == list(SUITE_PROFILES)


def test_an_unknown_name_is_a_usage_error_naming_the_suite_profiles():
    with pytest.raises(UsageError, match=r"--profile 'fast' is unknown; choose one of "
                       r"smoke, quick, full"):  # fmt: skip
        suite_profile("fast")


def test_the_names_are_written_once_in_the_code():
    """No other module lists the suite profiles' names or keys a table by them."""
    root = Path(profiles.__file__).parents[1]
    listed = re.compile(r"""["']smoke["']\s*[:,]""")
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path != Path(profiles.__file__) and listed.search(path.read_text())
    ]
    assert offenders == []
