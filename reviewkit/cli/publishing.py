"""Commands that publish: the demo, site build and site serve."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from reviewkit.cli.shared import emit_json, print_pdf_warnings, progress_bar, stderr, user_errors
from reviewkit.common.errors import UsageError
from reviewkit.suite import workloads as suite


@user_errors
def demo(
    out: Path = typer.Option(Path("reviewkit-demo"), help="folder for the runs, packet and site"),
    profile: str = typer.Option("quick", help="suite profile: smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    no_pdf: bool = typer.Option(False, "--no-pdf", help="skip the PDFs"),
    examples: Path | None = typer.Option(
        None,
        "--examples",
        help="a decisions log to publish beside the demo's decision "
        "(default: site/decisions, when run from a checkout)",
    ),
) -> None:
    """The embedded default: measure fp32 and bf16 here, review, check, render, publish."""

    from reviewkit.cli.console import stdout_console
    from reviewkit.cli.demo import DEFAULT_EXAMPLES, run_demo

    suite.plan_specs(profile, ("fp32", "bf16"), None)  # fail on a bad profile before measuring
    if examples is None:
        examples = DEFAULT_EXAMPLES if DEFAULT_EXAMPLES.is_dir() else None
    elif not examples.is_dir():
        raise UsageError(
            f"--examples {examples}: not a folder; give a decisions log (one folder per "
            "decision, as site/decisions) or leave it out"
        )
    console = stdout_console()
    console.soft_wrap = True  # paths and URLs stay on one line, whole and copyable

    with progress_bar() as on_progress:
        result = run_demo(
            out,
            profile,
            device,
            pdf=not no_pdf,
            say=lambda msg: stderr.print(msg, highlight=False),
            on_progress=on_progress,
            examples=examples,
        )
    console.print(f"review:  {result['review']}")
    console.print(
        f"gate:    {result['verdict']} ({len(result['red_flags'])} red flags: "
        f"{', '.join(result['red_flags']) or 'none'})"
    )
    console.print(f"packet:  {result['packet_html'].resolve().as_uri()}")
    if result["packet_pdf"]:
        console.print(f"pdf:     {result['packet_pdf'].resolve().as_uri()}")
    console.print(f"site:    {result['site_index'].resolve().as_uri()}")
    for whose, warnings in result["pdf_warnings"].items():
        print_pdf_warnings(warnings, whose)
    if result["site_failed"]:
        raise typer.Exit(1)


@user_errors
def site_build(
    site_dir: Path = typer.Argument(Path("site"), help="the decisions log (default: site)"),
    out: Path = typer.Option(..., "--out", help="folder to build the site into"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    no_pdf: bool = typer.Option(False, "--no-pdf", help="skip the PDF of each packet"),
    jobs: int | None = typer.Option(
        None, help="processes rendering decisions (default: one per core when many PDFs)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print what was built as JSON"),
) -> None:
    """Build the static site: index, one packet per decision, red flags, trends, rubric."""
    from reviewkit.site.build import build_site

    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: expected a positive integer")
    with progress_bar("decisions") as on_progress:
        result = build_site(
            site_dir,
            out,
            pdf=not no_pdf,
            rubric=rubric,
            jobs=jobs,
            progress=on_progress,
        )
    for d in result.decisions:
        print_pdf_warnings(d.pdf_warnings, d.slug)
    if as_json:
        emit_json(result.to_json())
    else:
        console = Console()
        counts = {
            s: sum(d.status == s for d in result.decisions)
            for s in ("rendered", "unchanged", "failed")
        }
        console.print(
            f"site: {result.out_dir / 'index.html'} ({counts['rendered']} rendered, "
            f"{counts['unchanged']} unchanged, {counts['failed']} failed, "
            f"{result.seconds:.1f} s)"
        )
        for d in result.failed:
            stderr.print(f"[red]failed:[/] {d.slug}: {d.error}", highlight=False)
    if result.failed:
        raise typer.Exit(1)


@user_errors
def site_serve(
    out: Path = typer.Argument(..., help="a built site folder"),
    port: int = typer.Option(8000, help="port on 127.0.0.1 (0 picks a free one)"),
) -> None:
    """Serve a built site on loopback only, for a local look."""
    from reviewkit.site.build import serve

    try:
        serve(out, port)
    except KeyboardInterrupt:
        stderr.print("stopped")
