"""Commands that review: compare, check, packet, walk."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from reviewkit.cli.shared import emit_json, print_pdf_warnings, stderr, user_errors


@user_errors
def compare_cmd(
    base: Path = typer.Argument(..., help="baseline run bundle (folder or run.json)"),
    cand: Path = typer.Argument(..., help="candidate run bundle (folder or run.json)"),
    fail_on_regression: bool = typer.Option(
        False,
        "--fail-on-regression",
        help="exit 1 if any workload's p99 is slower beyond the margin, at the rubric's false "
        "discovery rate across all workloads",
    ),
    rubric: Path | None = typer.Option(
        None, help="the rubric whose [verdicts] margins apply (default: rubrics/default.toml)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
) -> None:
    """Compare two run bundles: knob diff, ratios with 95% CIs, verdicts (no torch)."""
    from reviewkit.analysis.compare import compare
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run
    from reviewkit.cli.console import print_comparison, stdout_console
    from reviewkit.review.checks import CHECKS
    from reviewkit.review.checks.claim import knob_policy_of
    from reviewkit.review.gate import margins_of
    from reviewkit.review.rubric import load_rubric

    loaded = load_rubric(rubric, CHECKS)
    comparison = compare(
        analyse_run(load_run(base)), analyse_run(load_run(cand)), str(base), str(cand),
        margins=margins_of(loaded), knob_policy=knob_policy_of(loaded),
    )  # fmt: skip
    if as_json:
        emit_json(comparison.to_json())
    else:
        print_comparison(comparison, stdout_console())
    if fail_on_regression and comparison.p99_regressions:
        raise typer.Exit(1)


@user_errors
def check_cmd(
    review: Path = typer.Argument(..., help="the review file (review.toml)"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    allow_outside: bool = typer.Option(
        False, "--allow-outside", help="allow paths that leave the review's folder"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the findings as JSON"),
) -> None:
    """Fill the rubric from the runs and the review file; exit 1 if a blocking item fails."""
    from reviewkit.cli.console import print_check, stdout_console
    from reviewkit.review.gate import GATE_FAIL, run_check

    report = run_check(review, rubric, allow_outside=allow_outside)
    if as_json:
        emit_json(report.to_json())
    else:
        print_check(report, stdout_console())
    if report.verdict == GATE_FAIL:
        raise typer.Exit(1)


@user_errors
def packet(
    review: Path = typer.Argument(..., help="the review file (review.toml)"),
    out: Path = typer.Option(..., "--out", help="folder for packet.html, packet.pdf, packet.json"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    no_pdf: bool = typer.Option(False, "--no-pdf", help="write the HTML and JSON only"),
    allow_outside: bool = typer.Option(
        False, "--allow-outside", help="allow paths that leave the review's folder"
    ),
    as_json: bool = typer.Option(False, "--json", help="print what was written as JSON"),
) -> None:
    """Render the review packet: offline HTML with interactive charts, and a paged PDF."""
    from reviewkit.render.printing import PdfWorker

    # Started first: WeasyPrint's imports and font set-up (~1 s) run on the second core while
    # this process checks the review and builds the packet (docs/benchmarks.md).
    worker = None if no_pdf else PdfWorker()
    try:
        from rich.status import Status

        from reviewkit.render.packet import PdfNotProduced, write_packet

        with Status("rendering the packet", console=stderr) as status:
            result = write_packet(
                review,
                out,
                rubric,
                allow_outside,
                pdf=not no_pdf,
                progress=lambda msg: status.update(msg),
                pdf_worker=worker,
            )
    except PdfNotProduced as exc:
        # The HTML and JSON are in place: say what was written, then fail on the PDF.
        if as_json:
            emit_json(exc.result.to_json())
        raise
    finally:
        if worker is not None:
            worker.close()
    print_pdf_warnings(result.pdf_warnings)
    if as_json:
        emit_json(result.to_json())
        return
    console = Console()
    console.print(f"packet: {result.html}")
    if result.pdf:
        console.print(f"pdf:    {result.pdf}")
    timings = ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in result.timings_s.items())
    console.print(f"[dim]{timings}[/]")


@user_errors
def walk(
    review: Path = typer.Argument(..., help="the review file (review.toml) to answer into"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    redo_all: bool = typer.Option(False, "--all", help="ask answered questions again too"),
    answers: Path | None = typer.Option(
        None, "--answers", help="a TOML file of [answers.<item>] to record without asking"
    ),
    allow_outside: bool = typer.Option(
        False, "--allow-outside", help="allow paths that leave the review's folder"
    ),
) -> None:
    """Walk the senior review questions one at a time and record the answers in the review."""
    from reviewkit.cli.walk import run_walk

    code = run_walk(
        review, rubric, redo_all=redo_all, answers_file=answers, allow_outside=allow_outside
    )
    if code:
        raise typer.Exit(code)
