"""`tailwise report` and `tailwise compare`: plots and pages from results directories already written.

matplotlib, pandas and the report modules are imported inside the commands only: `tailwise --help`
and the measuring commands do not pay for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tailwise.cli.exits import EXIT_OK


def report(
    directory: Annotated[str, typer.Argument(
        metavar="DIR", show_default=False,
        help="a results directory: the --out of `tailwise run` or `tailwise sweep`")],
    out: Annotated[Optional[str], typer.Option(
        "--out", metavar="DIR", help="write the plots and report.html here instead of into DIRECTORY")] = None,
    model: Annotated[bool, typer.Option(
        "--model/--no-model", help="draw the queueing model (M/G/1) when the target was the built-in server")] = True,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="print nothing; only the exit status says it worked")] = False,
) -> int:
    """Plot a run or a sweep (PNG and SVG) and write one self-contained HTML page, report.html.

    A run: latency CCDF (log-log, with the CIs and the queueing model), CDF, send lag,
    percentiles over time; a run on agents, its agents and their start barrier too; a packet run
    (udp+flow://), its CCDF down to p99.9999, loss and reordering over time and its packets
    block. A sweep:
    latency vs load with CI bars, the CCDFs of its points, and the run plots of its highest
    unsaturated point. Prints the files written (and, on stderr, a run's agents or packets). Example:
    tailwise report results1
    """
    from tailwise.render.output import agent_lines, err_console
    from tailwise.render.packets import report_lines
    from tailwise.render.report import write_report
    from tailwise.results.documents.run import Summary
    from tailwise.results.summary import load_summary

    paths = write_report(directory, out, with_model=model)
    if not quiet:
        for p in paths:
            print(p)
        # stdout lists the files (one path a line, for scripts); a run's agents and packets are for
        # people (a sweep's points show theirs on its page).
        summary = load_summary(directory)
        if isinstance(summary, Summary):
            for line in agent_lines(summary) + report_lines(Path(directory), summary):
                err_console.print(line, highlight=False)
    return EXIT_OK


def compare(
    directories: Annotated[list[str], typer.Argument(
        metavar="DIR", show_default=False,
        help="two or more run directories (the --out of `tailwise run`); the first is the baseline")],
    label: Annotated[Optional[list[str]], typer.Option(
        "--label", metavar="NAME",
        help="a name for each directory, in order (repeat: --label base --label new) [default: the directories' "
             "names]")] = None,
    out: Annotated[Optional[str], typer.Option(
        "--out", metavar="DIR",
        help="also write compare.png, compare.svg, compare.html and summary.json (the --json document) here")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="print the comparison as JSON (schema tailwise.compare/1) instead of the table")] = False,
) -> int:
    """Overlay runs in one latency CCDF and compare their percentiles: difference to the first run and whether the CIs overlap.

    Example: tailwise compare base/ new/ --label before --label after --out cmp
    """
    from tailwise.render.compare import compare_doc, load_runs, print_compare, write_compare
    from tailwise.render.output import err_console
    from tailwise.results.files import dumps

    entries = load_runs(directories, label)
    doc = compare_doc(entries)
    if out:
        written = write_compare(doc, entries, out)
    if json_out:
        print(dumps(doc.to_json()))
    else:
        print_compare(doc)
    if out:
        err_console.print(f"comparison written to {out}/ ({', '.join(p.name for p in written)})", highlight=False)
    return EXIT_OK
