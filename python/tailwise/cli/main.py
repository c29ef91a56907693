"""The `tailwise` command line (typer). Each command parses and validates, then hands over to the
agent, the statistics and the output modules. Every user error ends as one line and status 2.

The commands live in their own modules (run, sweep, tools, report, agent, deploy), their shared options in
options.py; this module makes the app, registers them with their lines in --help (listed in
usage.ORDER), and turns every way a command can end into an exit status: a peer's flag refused
names tailwise's (usage.PEER_FLAGS)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

# typer 0.29 vendors its own click; its exceptions live here (the version is pinned).
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError

from tailwise import __version__
from tailwise.cli.agent import agent
from tailwise.cli.deploy import deploy_app
from tailwise.cli.doctor import doctor
from tailwise.cli.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from tailwise.cli.report import compare, report
from tailwise.cli.run import run
from tailwise.cli.sweep import sweep
from tailwise.cli.tools import calibrate, load, model, serve
from tailwise.cli.usage import Commands, peer_flag
from tailwise.errors import TailwiseError

app = typer.Typer(
    cls=Commands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain help, as hyperfine's: rich markup would eat every "[default: …]" in a help text.
    rich_markup_mode=None,
    context_settings={"max_content_width": 100},
    help="Open-loop tail-latency measurement of µs-scale services, with statistics that say whether to trust it.",
)


def _print_version(value: bool) -> None:
    if value:
        print(f"tailwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="print the version and exit")] = False) -> None:
    """Open-loop tail-latency measurement of µs-scale services, with statistics that say whether to trust it."""


def version() -> None:
    """Print the version."""
    print(f"tailwise {__version__}")


#: Each command with its line in `tailwise --help`, whole (usage.Commands lists them in usage.ORDER).
for command, line in (
    (run, "Measure latency at one open-loop load, to the precision asked."),
    (sweep, "Measure a series of loads: the knee, or the most meeting --slo."),
    (report, "Plot a run or a sweep and write one HTML page, report.html."),
    (compare, "Compare runs' percentiles and their CIs, overlaid in one CCDF."),
    (doctor, "This host's sources of jitter, one per knob, each with its fix."),
    (calibrate, "Each timestamp source's bias here, and the whole tool's."),
    (load, "Store every key of a workload, so that a run's gets hit."),
    (serve, "Run the built-in server, or a UDP reflector or forwarder."),
    (model, "Queueing-model ground truth: an M/G/k queue's percentiles."),
    (agent, "Serve coordinators' runs and sweeps (--agents) from this host."),
    (version, "Print the version."),
):
    app.command(short_help=line)(command)
app.add_typer(deploy_app, short_help="Start, check and stop agents on machines over SSH.")


def _patch_help() -> None:
    import typer.core

    # typer 0.29 (pinned) prints an argument's Python type (<list[str]>) after its name, whatever
    # its metavar; the metavar says it.
    typer.core.TyperArgument.display_type_rich = lambda self, ctx: None


def _command_path(ctx) -> str:
    """`tailwise deploy start`: the command a usage error is about, as typed (without the program's
    own name, which is `python -m tailwise` at times)."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(["tailwise", *reversed(names)])


def main() -> None:
    _patch_help()
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as e:
        print(e.ctx.get_help() if e.ctx else "see `tailwise --help`")
        code = EXIT_OK
    except UsageError as e:
        peer = peer_flag(e) if isinstance(e, NoSuchOption) else None
        if peer:
            print(f"tailwise: {peer}; see `{_command_path(e.ctx)} --help`", file=sys.stderr)
        else:
            print(f"tailwise: {e.format_message()} (see `{_command_path(e.ctx)} --help`)", file=sys.stderr)
        code = EXIT_ERROR
    except TailwiseError as e:
        print(f"tailwise: {e.line()}", file=sys.stderr)
        code = e.exit_code
    except (KeyboardInterrupt, typer.Abort):
        print("tailwise: interrupted before a result was complete; nothing was kept", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.stdout.flush()
    sys.exit(code if isinstance(code, int) else EXIT_OK)
