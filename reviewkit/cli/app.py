"""The `reviewkit` command line: the typer app and its commands, registered in --help order."""

from __future__ import annotations

import typer

from reviewkit.cli import evidence, measuring, projecting, publishing, reviewing, shortlisting
from reviewkit.cli.evidence import TRACE_SUMMARY_FILE
from reviewkit.cli.shared import cli_state

__all__ = ["TRACE_SUMMARY_FILE", "app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Measure a fixed torch suite and turn MFU and memory-stall fractions into decisions.",
)


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="show tracebacks for errors"),
) -> None:
    cli_state["debug"] = debug


# The commands live in one module per group; registering them here keeps --help in the order
# a user meets them: measure, compare and review, publish, then the evidence commands.
app.command()(measuring.run)
app.command()(measuring.ab)
app.command()(measuring.calibrate)
app.command()(measuring.show)
app.command("suite")(measuring.suite_cmd)
app.command("compare")(reviewing.compare_cmd)
app.command("check")(reviewing.check_cmd)
app.command()(reviewing.packet)
app.command()(publishing.demo)
app.command()(evidence.quality)
app.command()(evidence.sweep)
app.command()(evidence.soak)
app.command()(measuring.sensors)

site_app = typer.Typer(no_args_is_help=True, help="Publish the decisions log as a static site.")
app.add_typer(site_app, name="site")
site_app.command("build")(publishing.site_build)
site_app.command("serve")(publishing.site_serve)

app.command()(reviewing.walk)
app.command()(measuring.mfu)
app.command("project")(projecting.project_cmd)
app.command("shortlist")(shortlisting.shortlist_cmd)

trace_app = typer.Typer(no_args_is_help=True, help="Bring production profiler traces in.")
app.add_typer(trace_app, name="trace")
trace_app.command("import")(evidence.trace_import)
trace_app.command("merge")(evidence.trace_merge)
trace_app.command("diff")(evidence.trace_diff)
trace_app.command("slice")(evidence.trace_slice)


def main(argv: list[str] | None = None) -> None:
    app(args=argv, prog_name="reviewkit")
