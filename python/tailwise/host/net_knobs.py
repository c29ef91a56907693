"""`tailwise doctor`'s network knobs, one class per knob (host/reading.py says what they share):
the NIC's NUMA node, its interrupt coalescing (the ETHTOOL_GCOALESCE ioctl) and its interrupts'
CPUs, and the kernel's busy polling. Each but busy-poll concerns a run whose target is reached
through a NIC (``RunShape.nic``).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import re
import socket
import struct
from pathlib import Path

from tailwise.host.facts import cpu_list
from tailwise.host.reading import Fact, Knob, NotApplicable, RunShape, State, Unreadable, cpu_text, read_text

class NicNuma(Knob):
    name = "nic-numa"
    why = ("a NIC on another NUMA node than the cores moves every packet across the socket interconnect: "
           "KBNets §4.2 (local against remote)")
    source = "/sys/class/net/IF/device/numa_node (or its bus device's), /sys/devices/system/node/{online,nodeN/cpulist}"

    def matters(self, shape: RunShape) -> bool:
        return shape.nic

    def examine(self) -> Fact:
        dev = self.device()
        iface = self.ctx.iface
        nodes = cpu_list(self.text("sys/devices/system/node/online"))
        if len(nodes) < 2:
            raise NotApplicable(f"one NUMA node: every CPU is local to {iface}")
        where = self.up(dev, "numa_node")
        if where is None:
            raise Unreadable(f"no numa_node file for {iface}'s device ({dev}) or its parents")
        node = int(read_text(where))
        if node < 0:
            raise Unreadable(f"the firmware gives {iface}'s device no NUMA node ({where}: {node})")
        local = cpu_list(self.text(f"sys/devices/system/node/node{node}/cpulist"))
        ours = self.ours()
        value = f"{iface} on node {node} (CPU {cpu_text(local)}); tailwise's CPU {cpu_text(ours)}"
        readings = {"interface": iface, "node": node, "node_cpus": sorted(local), "nodes": sorted(nodes)}
        remote = ours - local
        if not remote:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail=f"CPU {cpu_text(remote)} is remote from {iface}'s node {node}",
                         fix=f"taskset -c {cpu_text(local)} tailwise …", **readings)


#: struct ethtool_coalesce (linux/ethtool.h) after its cmd: 22 __u32, of which these first 11.
_COALESCE_FIELDS = ("rx_usecs", "rx_frames", "rx_usecs_irq", "rx_frames_irq", "tx_usecs", "tx_frames",
                    "tx_usecs_irq", "tx_frames_irq", "stats_block_usecs", "adaptive_rx", "adaptive_tx")
SIOCETHTOOL = 0x8946
ETHTOOL_GCOALESCE = 0x0E


def ethtool_coalesce(iface: str) -> dict[str, int]:
    """The interface's interrupt coalescing, as `ethtool -c` reads it (SIOCETHTOOL
    ETHTOOL_GCOALESCE: no privilege needed); Unreadable with the reason."""
    buf = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GCOALESCE), 4 * 23)
    ifreq = struct.pack("16sP", iface.encode()[:15], ctypes.addressof(buf)).ljust(40, b"\0")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)
    except OSError as e:
        what = ("its driver does not report interrupt coalescing" if e.errno == errno.EOPNOTSUPP
                else e.strerror or str(e))
        raise Unreadable(f"ETHTOOL_GCOALESCE on {iface}: {what} (errno {e.errno})") from None
    values = struct.unpack("23I", buf.raw[:92])
    return dict(zip(_COALESCE_FIELDS, values[1:]))


class Coalescing(Knob):
    name = "coalescing"
    why = ("interrupt moderation holds a packet's interrupt for rx-usecs to batch it with others: each packet can "
           "wait that long (KBNets §3 turns it off)")
    source = "ioctl SIOCETHTOOL ETHTOOL_GCOALESCE on IF (what `ethtool -c IF` shows)"
    #: The system call (tests replace it).
    query = staticmethod(ethtool_coalesce)

    def matters(self, shape: RunShape) -> bool:
        return shape.nic

    def examine(self) -> Fact:
        self.device()
        iface = self.ctx.iface
        c = self.query(iface)
        value = (f"{iface}: rx-usecs {c['rx_usecs']}, rx-frames {c['rx_frames']}, adaptive-rx "
                 f"{'on' if c['adaptive_rx'] else 'off'}; tx-usecs {c['tx_usecs']}")
        readings = {"interface": iface, **c}
        if c["adaptive_rx"]:
            detail = "adaptive-rx: the driver stretches the hold with the packet rate"
        elif c["rx_usecs"] > 0 and c["rx_frames"] != 1:
            detail = f"a packet's interrupt waits up to {c['rx_usecs']} µs"
        else:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail=detail, fix=f"sudo ethtool -C {iface} adaptive-rx off rx-usecs 0",
                         **readings)


class IrqAffinity(Knob):
    name = "irq-affinity"
    why = ("a NIC interrupt on a core tailwise spins on preempts its thread: steer the queues' interrupts to other "
           "cores of the NIC's node (pyperf system tune; KBNets §4.2 local)")
    source = "/proc/interrupts, /sys/class/net/IF/device/msi_irqs, /proc/irq/N/{smp_affinity_list,effective_affinity_list}"

    def matters(self, shape: RunShape) -> bool:
        return shape.nic

    def examine(self) -> Fact:
        dev = self.device()
        iface = self.ctx.iface
        irqs = self._irqs(dev)
        if not irqs:
            raise Unreadable(f"no interrupt of {iface} in /proc/interrupts or its device's msi_irqs")
        allowed, runs = {}, {}
        for n in sorted(irqs):
            allowed[n] = cpu_list(self.text(f"proc/irq/{n}/smp_affinity_list"))
            runs[n] = cpu_list(self.optional(f"proc/irq/{n}/effective_affinity_list")) or allowed[n]
        value = f"{iface}: " + ", ".join(f"IRQ {n} → CPU {cpu_text(runs[n])}" for n in runs)
        if len({frozenset(a) for a in allowed.values()}) == 1:
            value += f" (allowed {cpu_text(next(iter(allowed.values())))})"
        readings = {"interface": iface, "irqs": {str(n): {"allowed": sorted(allowed[n]), "effective": sorted(runs[n])}
                                                 for n in runs}}
        ours = set(self.ctx.cpus)
        hit = [n for n in runs if runs[n] & ours]
        if not ours:
            return self.fact(State.OK, value, detail="tailwise's threads are not pinned: no CPU of theirs to keep free",
                             **readings)
        if not hit:
            return self.fact(State.OK, value, **readings)
        free = self.online() - ours
        fix = (f"echo {cpu_text(free)} | sudo tee /proc/irq/{{{','.join(map(str, hit))}}}/smp_affinity_list "
               "(with irqbalance stopped)" if free else
               "no CPU is free of tailwise's threads: fewer --threads/--workers, or a machine with more CPUs")
        return self.fact(State.WARN, value, fix=fix, **readings,
                         detail=f"IRQ {','.join(map(str, hit))} of {iface} run on tailwise's CPU {cpu_text(ours)}")

    def _irqs(self, dev: Path) -> set[int]:
        """The device's MSI interrupts (its own or its bus device's) and those /proc/interrupts names
        after the interface, the device or its PCI address."""
        irqs = set()
        msi = self.up(dev, "msi_irqs")
        if msi is not None:
            irqs |= {int(p.name) for p in msi.iterdir() if p.name.isdigit()}
        names = {self.ctx.iface, dev.name} | ({msi.parent.name} if msi is not None else set())
        pattern = re.compile("|".join(rf"(?<![\w]){re.escape(n)}(?![\w])" for n in names if n))
        for line in self.text("proc/interrupts").splitlines()[1:]:
            head, _, rest = line.partition(":")
            if head.strip().isdigit() and pattern.search(rest):
                irqs.add(int(head))
        return irqs


class BusyPoll(Knob):
    name = "busy-poll"
    why = ("net.core.busy_read/busy_poll make blocking socket reads and polls spin on the device queue instead of "
           "sleeping until its interrupt (Lancet's latency agent): information, as --poll spin polls in user space")
    source = "/proc/sys/net/core/{busy_read,busy_poll}"

    def matters(self, shape: RunShape) -> bool:
        return False  # information only: tailwise spins itself, and a server's blocking is its own choice

    def examine(self) -> Fact:
        read, poll = int(self.text("proc/sys/net/core/busy_read")), int(self.text("proc/sys/net/core/busy_poll"))
        value = f"busy_read {read} µs, busy_poll {poll} µs"
        if read or poll:
            return self.fact(State.OK, value, busy_read_us=read, busy_poll_us=poll)
        return self.fact(State.OK, value, detail="off: a blocking read sleeps until the interrupt (information)",
                         fix="sudo sysctl -w net.core.busy_read=50 net.core.busy_poll=50 (for a server here that blocks)",
                         busy_read_us=read, busy_poll_us=poll)
