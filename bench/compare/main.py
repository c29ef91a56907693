"""bench/run: tailwise side by side with the tools users know, on this machine, in one run.

    bench/run [QUESTION …] [--peers-src DIR] [--scratch DIR] [--repeats 3] [--quick] [--before DIR] [--out DIR]

Questions (all when none is named): bias servers co loadgen stats behind tls startup — each a
script here (bias.py, …). Servers on the lowest CPU, clients on the highest (taskset); each figure
the median of --repeats interleaved runs with its range; the machine's noise recorded during each
run (a pinned spinner's lost time before each repeat, steal and other processes' CPU during each
run).
Writes bench/out/compare-QUESTION.json and bench/out/compare.md, and prints the tables.
Peers are built once into --scratch (bench/peers/build.py); one that is missing is skipped with
its reason. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "bench" / "peers"))
# The checkout's tailwise when it holds a built extension, for this process and the clients.
if list((ROOT / "python" / "tailwise").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), *filter(None, [os.environ.get("PYTHONPATH")])])

QUESTIONS = ("bias", "servers", "co", "loadgen", "stats", "behind", "tls", "startup")
#: The peers' released sources: $TAILWISE_PEERS_SRC, else ../shared/peers beside the checkout (where
#: this project's machines keep them); without them those peers are skipped.
DEFAULT_SRC = Path(os.environ.get("TAILWISE_PEERS_SRC") or ROOT.parent / "shared" / "peers")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="bench/run", description=__doc__.splitlines()[0])
    ap.add_argument("questions", nargs="*", choices=[[], *QUESTIONS], metavar="QUESTION",
                    help=f"any of {', '.join(QUESTIONS)} [all]")
    ap.add_argument("--peers-src", type=Path, default=DEFAULT_SRC if DEFAULT_SRC.is_dir() else None,
                    help="release archives (NAME-*.tar.gz) or clones (NAME/) of mutilate, memtier_benchmark, wrk2 "
                         f"[{DEFAULT_SRC} when it exists, else those peers are skipped]")
    ap.add_argument("--scratch", type=Path, default=Path.home() / ".cache" / "tailwise-bench",
                    help="where peers are built, once [~/.cache/tailwise-bench]")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of every figure [3]")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one client run [3]")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 1 repeat of 1 s runs, fewer rate steps, a 5 s memory run")
    ap.add_argument("--before", type=Path, default=None,
                    help="another checkout of tailwise (its python/ tree with _core built), measured beside this "
                         "one as 'tailwise (before)' where a question compares the two (startup)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="where the JSON and compare.md go")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.seconds = 1, 1.0
    args.questions = list(args.questions) or list(QUESTIONS)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from build import all_peers
    from common import CLIENT_CPU, SERVER_CPU, Ctx
    from tailwise.host.facts import host_info

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0 = time.monotonic()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.scratch.mkdir(parents=True, exist_ok=True)
    src = args.peers_src if args.peers_src and args.peers_src.is_dir() else None
    peers = all_peers(src, args.scratch, log=log)
    build_s = time.monotonic() - t0
    work = Path(tempfile.mkdtemp(prefix="run-", dir=args.scratch))
    ctx = Ctx(peers=peers, repeats=args.repeats, quick=args.quick, seconds=args.seconds, work=work, log=log,
              before=args.before)
    args.out.mkdir(parents=True, exist_ok=True)
    host = host_info()
    header = (f"bench/run {' '.join(args.questions)} --repeats {args.repeats} --seconds {args.seconds:g}"
              f"{' --quick' if args.quick else ''} — {started}, {host.get('cpu_model')} × {host.get('cores')} vCPU, "
              f"kernel {host.get('kernel')}; servers on CPU {SERVER_CPU}, clients on CPU {CLIENT_CPU}")
    md = [f"# bench/run\n\n{header}\n"]
    skipped = {n: p["why"] for n, p in peers.items() if not p.get("path")}
    if skipped:
        md.append("Peers skipped: " + "; ".join(f"{n}: {w}" for n, w in skipped.items()) + "\n")
    try:
        for q in args.questions:
            log(f"== {q}")
            qt = time.monotonic()
            mod = importlib.import_module(q)
            try:
                res = mod.run(ctx)
            except Exception as e:  # noqa: BLE001 - one question's failure must not lose the others
                res = {"error": f"{type(e).__name__}: {e}", "table": f"*failed: {type(e).__name__}: {e}*",
                       "noise_text": ""}
            res.update({"question": q, "started": started, "host": host, "peers": peers, "repeats": args.repeats,
                        "seconds": args.seconds, "wall_s": round(time.monotonic() - qt, 1)})
            (args.out / f"compare-{q}.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
            doc = (mod.__doc__ or q).strip().splitlines()[0].removeprefix(f"{q}: ")
            block = f"## {q} — {doc}\n\n{res['table']}\n\n{res.get('note', '')}\n\n{res.get('noise_text', '')}" \
                    f" ({res['wall_s']:.0f} s)\n"
            md.append(block)
            print("\n" + block, flush=True)
            (args.out / "compare.md").write_text("\n".join(md))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = time.monotonic() - t0
    md.append(f"Total {total / 60:.1f} min (peers {build_s:.0f} s).\n")
    (args.out / "compare.md").write_text("\n".join(md))
    print(f"total {total / 60:.1f} min (peers {build_s:.0f} s); written to {args.out}/compare.md and "
          f"compare-*.json", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
