"""bench/peers: the tools users compare against, built or found, never inside the project tree.

    python bench/peers/build.py [--peers-src DIR] [--scratch DIR]   # prints what it has, as JSON

* from source (``--peers-src``: a directory holding ``NAME-*.tar.gz`` release archives, as
  ``$TAILWISE_PEERS_SRC`` or ../shared/peers beside the checkout does, or ``NAME/`` clones): mutilate (with bench/peers/mutilate.patch: the
  Python-3 SConstruct and the NULL strtok_r save pointer), memtier_benchmark (autoreconf,
  configure, make) and wrk2 (make; it bundles LuaJIT). Each is unpacked and built once into
  ``SCRATCH/build/NAME-<digest of its source and of the patch>``; a later call finds it there.
* from Debian (found on PATH, never installed here): redis-benchmark (redis-tools), sockperf,
  memcslap (libmemcached-tools), wrk, h2load (nghttp2-client).
* from the Go module proxy: vegeta and fortio at pinned versions, ``go install``ed into
  ``SCRATCH/gopath``.

A peer that is absent or does not build is returned with ``path: None`` and the reason; no
failure here raises. Every build step is bounded by a timeout; logs are kept in the scratch dir.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The peers' released sources: $TAILWISE_PEERS_SRC, else ../shared/peers beside the checkout (where
#: this project's machines keep them).
DEFAULT_SRC = Path(os.environ.get("TAILWISE_PEERS_SRC") or HERE.parents[2] / "shared" / "peers")
PATCHES = {"mutilate": HERE / "mutilate.patch"}
#: One build step may take this long (a busy 2-vCPU machine builds memtier in ~1-2 min).
STEP_TIMEOUT_S = 600

#: name -> (steps run in the unpacked source, the binary it leaves, Debian build packages)
SOURCE_PEERS = {
    "mutilate": ([["scons", "-j2", "mutilate"]], "mutilate",
                 "scons gengetopt libevent-dev libzmq3-dev g++"),
    "memtier_benchmark": ([["autoreconf", "-ivf"], ["./configure"], ["make", "-j2"]], "memtier_benchmark",
                          "autoconf automake libtool pkg-config libevent-dev libssl-dev libpcre3-dev zlib1g-dev"),
    "wrk2": ([["make", "-j2"]], "wrk", "make gcc libssl-dev"),
}
#: name -> (binary, Debian package)
DEBIAN_PEERS = {
    "redis-benchmark": ("redis-benchmark", "redis-tools"),
    "sockperf": ("sockperf", "sockperf"),
    "memcslap": ("memcslap", "libmemcached-tools"),
    "wrk": ("wrk", "wrk"),
    "h2load": ("h2load", "nghttp2-client"),
}
#: name -> (module@version, binary). fortio 1.67+ needs grol.io/grol, which the module proxy
#: here refuses (403); 1.66.5 (2024-09) is the newest without it.
GO_PEERS = {
    "vegeta": ("github.com/tsenart/vegeta/v12@v12.13.0", "vegeta"),
    "fortio": ("fortio.org/fortio@v1.66.5", "fortio"),
}


def _source(src_dir: Path, name: str) -> Path | None:
    """The peer's source: a clone ``src_dir/name`` or the newest archive ``name-*.tar.gz``."""
    clone = src_dir / name
    if clone.is_dir():
        return clone
    archives = sorted(src_dir.glob(f"{name}-*.tar.gz"))
    return archives[-1] if archives else None


def _digest(source: Path, patch: Path | None) -> str:
    h = hashlib.sha256()
    if source.is_file():
        h.update(source.read_bytes())
    else:  # a clone: its HEAD (or its path when not a git checkout)
        head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30)
        h.update((head.stdout.strip() or str(source.resolve())).encode())
    if patch is not None:
        h.update(patch.read_bytes())
    return h.hexdigest()[:12]


def _unpack(source: Path, into: Path) -> Path:
    """Copy or extract the source into ``into``; return the directory holding its top level."""
    if source.is_dir():
        dst = into / source.name
        shutil.copytree(source, dst, ignore=shutil.ignore_patterns(".git"))
        return dst
    with tarfile.open(source) as tar:
        tar.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise RuntimeError(f"{source.name}: expected one top directory, found {len(tops)}")
    return tops[0]


def _step(argv: list[str], cwd: Path, log: Path, env: dict | None = None) -> None:
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(argv)}\n")
        f.flush()
        try:
            done = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=STEP_TIMEOUT_S, env=env)
        except FileNotFoundError:
            raise RuntimeError(f"`{argv[0]}` is not installed") from None
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`{' '.join(argv)}` took over {STEP_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"`{' '.join(argv)}` exited {done.returncode}: {' / '.join(tail)} (log: {log})")


def build_source_peer(name: str, src_dir: Path, scratch: Path) -> dict:
    steps, binary, packages = SOURCE_PEERS[name]
    source = _source(src_dir, name)
    if source is None:
        return {"path": None, "why": f"no source of {name} in {src_dir} (a {name}/ clone or {name}-*.tar.gz)"}
    patch = PATCHES.get(name)
    out = scratch / "build" / f"{name}-{_digest(source, patch)}"
    done_mark = out / "built"
    if done_mark.exists():
        return {"path": done_mark.read_text().strip(), "source": str(source), "built": "before"}
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = out / "build.log"
    try:
        tree = _unpack(source, out / "src")
        if patch is not None:
            _step(["patch", "-p1", "-i", str(patch)], tree, log)
        for argv in steps:
            _step(argv, tree, log)
        exe = tree / binary
        if not os.access(exe, os.X_OK):
            raise RuntimeError(f"the build left no {binary} (log: {log})")
    except (RuntimeError, OSError, tarfile.TarError) as e:
        return {"path": None, "why": f"{name} did not build: {e}; Debian packages it needs: {packages}"}
    done_mark.write_text(str(exe) + "\n")
    return {"path": str(exe), "source": str(source), "built": "now"}


def go_peer(name: str, scratch: Path) -> dict:
    module, binary = GO_PEERS[name]
    gopath = scratch / "gopath"
    exe = gopath / "bin" / binary
    stamp = gopath / f"{binary}.version"
    if exe.exists() and stamp.exists() and stamp.read_text().strip() == module:
        return {"path": str(exe), "module": module, "built": "before"}
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        return {"path": None, "why": "no Go toolchain (`go`) to install it with"}
    gopath.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOPATH": str(gopath), "GOBIN": str(gopath / "bin"), "GOFLAGS": "-modcacherw",
           "GOTOOLCHAIN": "local"}
    try:
        _step([go, "install", module], scratch, gopath / f"{binary}.log", env=env)
    except RuntimeError as e:
        return {"path": None, "why": f"go install {module} failed: {e}"}
    stamp.write_text(module + "\n")
    return {"path": str(exe), "module": module, "built": "now"}


def debian_peer(name: str) -> dict:
    binary, package = DEBIAN_PEERS[name]
    found = shutil.which(binary)
    return {"path": found, "package": package} if found else \
        {"path": None, "why": f"{binary} is not installed (apt-get install {package})"}


def all_peers(src_dir: Path | None, scratch: Path, log=print) -> dict[str, dict]:
    """Every peer: {name: {"path": str | None, "why": reason when None, ...}}."""
    peers: dict[str, dict] = {}
    for name in SOURCE_PEERS:
        if src_dir is None:
            peers[name] = {"path": None, "why": f"no --peers-src directory (and {DEFAULT_SRC} is absent)"}
        else:
            log(f"peers: {name} …")
            peers[name] = build_source_peer(name, src_dir, scratch)
    for name in DEBIAN_PEERS:
        peers[name] = debian_peer(name)
    for name in GO_PEERS:
        log(f"peers: {name} …")
        peers[name] = go_peer(name, scratch)
    for name, p in peers.items():
        log(f"peers: {name:18} {p['path'] or 'skipped: ' + p['why']}")
    return peers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers-src", type=Path, default=DEFAULT_SRC,
                    help=f"the peers' released sources [default: $TAILWISE_PEERS_SRC, else {DEFAULT_SRC}]")
    ap.add_argument("--scratch", type=Path, default=Path.home() / ".cache" / "tailwise-bench")
    args = ap.parse_args()
    src = args.peers_src if args.peers_src.is_dir() else None
    print(json.dumps(all_peers(src, args.scratch, log=lambda m: print(m, file=sys.stderr)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
