"""One SLA matcher and one judge, worked by hand."""

from __future__ import annotations

from dataclasses import dataclass

from reviewkit.analysis.sla import calls_per_s, judge, matching_targets
from reviewkit.analysis.stats import summarise


@dataclass(frozen=True)
class T:
    workload: str
    p99_s: float | None = None
    min_throughput_per_s: float | None = None


def test_a_target_matches_by_id_or_by_the_shape_without_dtype():
    by_id, by_shape, glob, other = (T("model.gpt.b1s256.bf16"), T("model.gpt.b1s256"),
                                    T("model.*"), T("gemm.*"))  # fmt: skip
    got = matching_targets([by_id, by_shape, glob, other], "model.gpt.b1s256.bf16",
                           "model.gpt.b1s256")  # fmt: skip
    assert got == [by_id, by_shape, glob]
    # the fp32 workload of the same shape: the shape target and the glob, not the bf16 id
    assert matching_targets([by_id, by_shape, glob], "model.gpt.b1s256.fp32",
                            "model.gpt.b1s256") == [by_shape, glob]  # fmt: skip


def test_throughput_is_one_over_the_mean_and_limits_are_inclusive():
    assert calls_per_s(summarise([0.125] * 3)) == 8.0  # 1 / 0.125 s
    t = T("m", p99_s=0.15, min_throughput_per_s=8.0)
    assert judge(t, 0.15, 8.0).met  # exactly at both limits: met
    assert judge(t, 0.1500001, 9.0).p99_ok is False
    assert judge(t, 0.1, 7.99).throughput_ok is False and not judge(t, 0.1, 7.99).met
    only_p99 = judge(T("m", p99_s=0.2), 0.1, 0.0)
    assert (only_p99.p99_ok, only_p99.throughput_ok, only_p99.met) == (True, None, True)
