"""The packet's own sections in page order, each declared once (see sections/base.py)."""

from __future__ import annotations

import reviewkit.render.packet.fields as f
import reviewkit.render.packet.figures as figures
from reviewkit.render.packet.brief import build_brief
from reviewkit.render.packet.energy import energy_charts
from reviewkit.render.packet.quality import quality_charts
from reviewkit.render.packet.sections.base import Section
from reviewkit.render.packet.shapes import shape_charts
from reviewkit.render.packet.soak import soak_charts
from reviewkit.render.packet.sweep import sweep_charts

CORE: tuple[Section, ...] = (
    Section("brief", "Decision brief", fields=("brief",), listed=False,
            summarise=lambda p, model: {"brief": build_brief(p.report, model)}),
    Section("claim", "Claim and reproducible slices", fields=("slices",), build=f.claim_fields),
    Section("knobs", "Knob diff", fields=("knob_diffs",), build=f.knob_fields),
    Section("bottlenecks", "Bottleneck class by layer type",
            fields=("bottlenecks", "below_roof_share", "bottleneck_evidence"),
            build=f.bottleneck_fields, charts=("roofline",),
            draw=lambda p: figures.roofline_charts(p.runs)),
    Section("layers", "MFU and memory-stall fraction by layer type",
            fields=("layers", "claim_dtypes", "raised_ceilings"), build=f.layer_fields,
            charts=("mfu_by_layer", "stall_by_layer", "time_decomposition"),
            draw=lambda p: figures.layer_charts(p.layer_rows)),
    Section("comparison", "Baseline against candidate",
            charts=("forest_layers", "forest_workloads", "shape_portability"),
            optional_charts=("forest_claim", "trade_view"),
            draw=lambda p: {**figures.comparison_charts(p.report),
                            **figures.trade_charts(p.report),
                            **shape_charts(p.report, p.workload_rows)}),
    Section("platforms", "Platforms side by side", fields=("platforms",),
            build=f.platform_fields, optional_charts=("platform_matrix",),
            draw=lambda p: figures.platform_charts(p.matrix, p.platforms)),
    Section("latency", "Latency: p50, p95, p99", fields=("sla",), build=f.latency_fields,
            charts=("latency",), draw=lambda p: figures.latency_charts(p.runs)),
    Section("production-fit", "Production fit: traces against the suite",
            fields=("production_fit",), build=f.production_fit_fields,
            optional_charts=("fit_matrix",), draw=lambda p: p.production_fit[1]),
    Section("evidence", "Production-like evidence", fields=("soak_notes",),
            build=f.evidence_fields,
            charts=("latency_throughput", "stability", "perf_per_watt", "quality_drift"),
            draw=lambda p: {**sweep_charts(p.report), **soak_charts(p.soak),
                            **energy_charts(p.runs), **quality_charts(p.report)}),
    Section("workloads", "Per-workload table", fields=("workloads", "pdf_max_workload_rows"),
            build=f.workload_fields),
    Section("red-flags", "Red flags", fields=("red_flags",), build=f.red_flag_fields),
    Section("findings", "Rubric findings", fields=("findings",), build=f.finding_fields),
    Section("risks", "Owner and risk map", fields=("risks",), build=f.risk_fields,
            charts=("risk_map",), draw=lambda p: figures.risk_charts(p.report)),
    Section("rollback", "Rollback", fields=("rollback",), build=f.rollback_fields),
    Section("disproof", "Disproof criteria", fields=("disproof",), build=f.disproof_fields),
    Section("questions", "Senior review questions", fields=("questions",),
            build=f.question_fields),
    Section("environment", "Environment and software stack",
            fields=("environment", "environment_diff"), build=f.environment_fields),
    Section("artifacts", "Appendix: artifacts", fields=("artifacts",), build=f.artifact_fields),
)  # fmt: skip

