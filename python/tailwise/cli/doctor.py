"""`tailwise doctor`: the host's sources of jitter, one line per knob (host/doctor.py reads them,
render/doctor.py prints them). A report: exit 0 whatever it finds, 2 on bad input."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from tailwise.cli.exits import EXIT_OK


def doctor(
    target: Annotated[Optional[str], typer.Argument(
        metavar="TARGET", show_default=False,
        help="the target a run would measure (a URL, as for `tailwise run`): the NIC knobs read the interface that "
             "routes to it; none: the default route's interface")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="print one JSON document (schema tailwise.doctor/1, docs/schema/) instead of the table")] = False,
) -> int:
    """The host's sources of jitter, one per knob: what it read, whether it is fine for the tail, why it matters, and the command that would fix it. Needs no root; says what it could not read.

    Example: tailwise doctor memcached://10.0.0.5:11211 --json
    """
    from tailwise.host.doctor import SAMPLE_S, Doctor, default_interface, route_interface
    from tailwise.host.facts import host_info, pinned_cpus
    from tailwise.render.doctor import print_doctor
    from tailwise.results.documents.doctor import report
    from tailwise.results.files import dumps
    from tailwise.spec.target import parse_target
    from tailwise.spec.workload import DEFAULTS

    workers = DEFAULTS["workers"]
    if target:
        addr = parse_target(target).socket_addr()  # InputError: one line, exit 2
        iface, note = route_interface(addr)
        workers = 0  # a run against a target starts no built-in server
    else:
        iface = default_interface()
        note = None if iface else "no TARGET given and no default route"
    cpus = pinned_cpus(DEFAULTS["threads"], workers)
    facts = Doctor(iface=iface, cpus=cpus, sample_s=SAMPLE_S, iface_note=note).facts()
    doc = report(host=host_info(), target=target, interface=iface, interface_note=note, cpus=cpus, sample_s=SAMPLE_S,
                 knobs=[f.as_json() for f in facts])
    if json_out:
        print(dumps(doc))
    else:
        print_doctor(doc)
    return EXIT_OK
