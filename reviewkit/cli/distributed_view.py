"""The terminal view of a multi-rank run: its set-up, link, stragglers, scaling and collectives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from reviewkit.cli.tables import DataTable, time_text
from reviewkit.common.format import MISSING, binary_size, pct

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun


def _gbps(x: float | None) -> str:
    return MISSING if x is None else f"{x / 1e9:.3g}"


def distributed_lines(run: AnalysedRun) -> list[str]:
    """A multi-rank run's set-up, link, stragglers and scaling, one line each."""
    d = run.distributed
    if not d:
        return []
    hosts = ", ".join(f"{escape(h)} ({n})" for h, n in d["ranks_per_host"].items())
    link = (run.ceilings or {}).get("interconnect") or {}
    lines = [f"[bold]distributed[/]: {d['world_size']} ranks · {escape(str(d['backend']))} · "
             f"{escape(str(d.get('launcher')))} · hosts {hosts}"]  # fmt: skip
    if link.get("peak"):
        sheet = f", datasheet {_gbps(link['datasheet'])} GB/s" if link.get("datasheet") else ""
        lines.append(
            f"link ceiling {_gbps(link['peak'])} GB/s (trials {_gbps(link.get('low'))}-"
            f"{_gbps(link.get('high'))}{sheet}): {escape(link.get('measured_method', ''))}"
        )
    else:
        lines.append(f"link ceiling: not available ({escape(str(link.get('reason')))})")
    share = (run.ceilings or {}).get("rank_share")
    if share:
        lines.append(f"ceilings per rank: {escape(share['reason'])}")
    st = run.stragglers
    if st and st.flagged:
        for f in st.flagged:
            lines.append(
                f"[red]straggler[/]: rank {f.rank} on {escape(str(f.host))} runs the "
                f"compute probes {f.ratio:.2f}x the other ranks' median (threshold "
                f"{st.ratio_threshold:.2f}x): a bad device, throttling or a noisy neighbour"
            )
    elif st and st.rank_ratio:
        worst = max(st.rank_ratio)
        lines.append(f"no straggler: the slowest rank runs the compute probes {worst:.2f}x the "
                     f"other ranks' median (threshold {st.ratio_threshold:.2f}x)")  # fmt: skip
    for sc in run.scaling:
        comm = sc.communication_fraction
        lines.append(
            f"tensor parallel {sc.tp} ({escape(str(sc.dtype))}): {sc.speedup:.2f}x the "
            f"unsharded layer, scaling efficiency {pct(sc.efficiency)}"
            + (f", communication {pct(comm)} of its time" if comm is not None else "")
        )
    if d.get("incomplete"):
        lines.append(f"[red]incomplete[/]: {escape(d['incomplete'])}")
    return lines


def collectives_table(run: AnalysedRun) -> Table | None:
    """Per collective: latency (the slowest rank per call), nccl-tests' algbw and busbw, the
    share of the link ceiling, and the skew across ranks."""
    rows = [w for w in run.workloads if w.collective]
    if not rows:
        return None
    t = DataTable(title="Collectives (a call's time is its slowest rank's)", title_justify="left")
    for col in ("workload", "size", "p50", "p99", "algbw GB/s", "busbw GB/s", "of link",
                "rank skew"):  # fmt: skip
        t.add_column(col, justify="left" if col == "workload" else "right")
    for w in rows:
        c, s, skew = w.collective, w.stats, w.skew
        t.add_row(
            w.id, binary_size(c.message_bytes), time_text(s.p50_s), time_text(s.p99_s),
            _gbps(c.algbw_p50_bytes_per_s), _gbps(c.busbw_p50_bytes_per_s),
            pct(c.link_fraction),
            f"{skew.max_over_median:.2f}x (rank {skew.slowest_rank})"
            if skew and skew.max_over_median else MISSING,
        )  # fmt: skip
    return t
