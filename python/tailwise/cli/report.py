"""`tailwise report` and `tailwise compare`: plots and pages from results directories already written.

Registered on the main app by cli.py. matplotlib, pandas and the report modules are imported
inside the commands only: `tailwise --help` and the measuring commands do not pay for them.
"""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the report and compare commands to ``app``."""

    @app.command()
    def report(
        directory: str = typer.Argument(..., help="a results directory: the --out of `tailwise run` or `tailwise sweep`"),
        out: Optional[str] = typer.Option(None, "--out", help="write the plots and report.html here instead of into DIRECTORY"),
        model: bool = typer.Option(True, "--model/--no-model", help="draw the queueing model (M/G/1) when the target was the built-in server"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="print nothing; only the exit status says it worked"),
    ) -> int:
        """Plot a run or a sweep (PNG and SVG) and write one self-contained HTML page, report.html.

        A run: latency CCDF (log-log, with the CIs and the queueing model), CDF, send lag,
        percentiles over time. A sweep: latency vs load with CI bars, the CCDFs of its points,
        and the run plots of its highest unsaturated point. Example: tailwise report results1
        """
        from tailwise.render.report import write_report

        paths = write_report(directory, out, with_model=model)
        if not quiet:
            for p in paths:
                print(p)
        return 0

    @app.command()
    def compare(
        directories: list[str] = typer.Argument(..., help="two or more run directories (the --out of `tailwise run`); the first is the baseline"),
        label: Optional[list[str]] = typer.Option(None, "--label", help="a name for each directory, in order (repeat: --label base --label new); default: the directories' names"),
        out: Optional[str] = typer.Option(None, "--out", help="also write compare.png, compare.svg, compare.html and summary.json (the --json document) here"),
        json_out: bool = typer.Option(False, "--json", help="print the comparison as JSON (schema tailwise.compare/1) instead of the table"),
    ) -> int:
        """Overlay runs in one latency CCDF and compare their percentiles: difference to the first run and whether the CIs overlap.

        Example: tailwise compare base/ new/ --label before --label after --out cmp
        """
        from tailwise.render.compare import compare_doc, load_runs, print_compare, write_compare
        from tailwise.results.files import dumps
        from tailwise.render.output import err_console

        entries = load_runs(directories, label)
        doc = compare_doc(entries)
        if out:
            written = write_compare(doc, entries, out)
        if json_out:
            print(dumps(doc))
        else:
            print_compare(doc)
        if out:
            err_console.print(f"comparison written to {out}/ ({', '.join(p.name for p in written)})", highlight=False)
        return 0
