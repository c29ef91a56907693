"""`tailwise doctor`'s knobs (host/doctor.py, cpu_knobs.py, net_knobs.py) on a fake sysfs/procfs
tree: each state read from files, a missing file unreadable (never ok), /proc/stat samples, the
kernel command line, and which warnings a run gets. The command itself, as root and unprivileged:
tests/e2e/test_doctor.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailwise.host import net_knobs as d
from tailwise.host.cpu_knobs import Clocksource, CStates, Governor, Isolation, OtherLoad, Smt, Steal, Thp, Turbo
from tailwise.host.doctor import KNOBS, Doctor, default_interface
from tailwise.host.net_knobs import BusyPoll, Coalescing, IrqAffinity, NicNuma
from tailwise.host.reading import Context, CpuSample, RunShape, State, cmdline, cpu_text, parse_stat, stat_shares

STAT_BEFORE = """cpu  1000 0 500 8000 100 0 50 0 0 0
cpu0 250 0 125 2000 25 0 10 0 0 0
cpu1 250 0 125 2000 25 0 10 0 0 0
cpu2 250 0 125 2000 25 0 15 0 0 0
cpu3 250 0 125 2000 25 0 15 0 0 0
intr 123
"""


def _stat_after(busy: dict[int, int], steal: dict[int, int]) -> str:
    """/proc/stat 100 ticks per CPU later: ``busy[c]`` of them user time, ``steal[c]`` steal, the rest idle."""
    rows, total = [], [0] * 10
    for c, line in enumerate(STAT_BEFORE.splitlines()[1:5]):
        v = [int(x) for x in line.split()[1:]]
        b, s = busy.get(c, 0), steal.get(c, 0)
        v[0] += b
        v[7] += s
        v[3] += 100 - b - s
        rows.append(f"cpu{c} " + " ".join(map(str, v)))
        total = [t + x for t, x in zip(total, v)]
    return "cpu  " + " ".join(map(str, total)) + "\n" + "\n".join(rows) + "\nintr 456\n"


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


@pytest.fixture
def host(tmp_path) -> Path:
    """A tuned 4-CPU machine with SMT pairs (0,2) (1,3), two NUMA nodes (0-1, 2-3) and a NIC eth9
    on node 0 behind a PCI device; every knob reads ok on it for tailwise on CPU 1."""
    r = tmp_path / "root"
    cpu = "sys/devices/system/cpu"
    write(r, f"{cpu}/online", "0-3")
    write(r, f"{cpu}/isolated", "1")
    write(r, f"{cpu}/nohz_full", "1")
    write(r, f"{cpu}/smt/control", "on")
    write(r, f"{cpu}/intel_pstate/no_turbo", "1")
    write(r, f"{cpu}/cpuidle/current_driver", "intel_idle")
    for c in range(4):
        write(r, f"{cpu}/cpu{c}/topology/thread_siblings_list", "0,2" if c % 2 == 0 else "1,3")
        for name, value in (("governor", "performance"), ("min_freq", "3500000"), ("max_freq", "3500000"),
                            ("cur_freq", "3499000"), ("driver", "intel_pstate")):
            write(r, f"{cpu}/cpu{c}/cpufreq/scaling_{name}", value)
        for i, (name, lat, off) in enumerate((("POLL", 0, 0), ("C1", 2, 0), ("C6", 133, 1))):
            for f, v in (("name", name), ("latency", lat), ("disable", off)):
                write(r, f"{cpu}/cpu{c}/cpuidle/state{i}/{f}", str(v))
    write(r, "sys/devices/system/node/online", "0-1")
    write(r, "sys/devices/system/node/node0/cpulist", "0-1")
    write(r, "sys/devices/system/node/node1/cpulist", "2-3")
    pci = "sys/devices/pci0000:00/0000:00:03.0"
    write(r, f"{pci}/numa_node", "0")
    write(r, f"{pci}/msi_irqs/40", "msix")
    write(r, f"{pci}/msi_irqs/41", "msix")
    (r / "sys/class/net/eth9").mkdir(parents=True)
    (r / "sys/class/net/eth9/device").symlink_to("../../../devices/pci0000:00/0000:00:03.0")
    (r / "sys/class/net/lo").mkdir(parents=True)
    write(r, "proc/interrupts", "           CPU0       CPU1       CPU2       CPU3\n"
          " 40:  1  2  3  4  PCI-MSIX-0000:00:03.0  0-edge  eth9-TxRx-0\n"
          " 41:  1  2  3  4  PCI-MSIX-0000:00:03.0  1-edge  eth9-TxRx-1\n"
          " 42:  0  0  0  0  PCI-MSIX-0000:00:04.0  0-edge  eth90-TxRx-0\n"
          " 43:  0  0  0  0  PCI-MSIX-0000:00:05.0  0-edge  nvme0q1\n"
          "LOC:  5  5  5  5  Local timer interrupts")
    for irq, cpus in ((40, "0"), (41, "2"), (42, "1"), (43, "1")):
        write(r, f"proc/irq/{irq}/smp_affinity_list", "0,2-3")
        write(r, f"proc/irq/{irq}/effective_affinity_list", cpus)
    write(r, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]")
    write(r, "sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never")
    write(r, "proc/sys/net/core/busy_read", "50")
    write(r, "proc/sys/net/core/busy_poll", "50")
    write(r, "sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc")
    write(r, "sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm")
    write(r, "proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n")
    write(r, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=1 nohz_full=1 rcu_nocbs=1 "
          "intel_idle.max_cstate=1 quiet -- --init-flag idle=poll")
    write(r, "proc/stat", STAT_BEFORE)
    write(r, "proc/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
          "eth9\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
          "eth9\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0")
    return r


def sample(root: Path, busy=None, steal=None) -> CpuSample:
    """A sample from STAT_BEFORE whose second reading is written while it 'waits'."""
    write(root, "proc/stat", STAT_BEFORE)
    return CpuSample(root, 0.5, wait=lambda s: write(root, "proc/stat", _stat_after(busy or {}, steal or {})))


def read(knob, root: Path, iface: str | None = "eth9", cpus=(1,), **kw):
    return knob(root, Context(iface=iface, cpus=frozenset(cpus), sample=kw.pop("sample", None) or sample(root),
                              **kw)).read()


# --------------------------------------------------------------------------- every knob

def test_every_knob_reads_ok_on_a_tuned_machine(host, monkeypatch):
    monkeypatch.setattr(Coalescing, "query", staticmethod(lambda iface: dict.fromkeys(d._COALESCE_FIELDS, 0)))
    facts = [read(k, host) for k in KNOBS]
    assert [(f.name, f.state) for f in facts] == [(k.name, State.OK) for k in KNOBS], [f.detail for f in facts]
    for f in facts:
        assert f.why and f.source and f.value and f.fix is None, f
        assert f.as_json()["state"] == "ok"


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_a_missing_file_is_unreadable_never_ok(tmp_path, knob):
    """Nothing exists under the root: every knob is unreadable, and says which file."""
    f = read(knob, tmp_path, sample=CpuSample(tmp_path, 0.0))
    assert f.state is State.UNREADABLE, f
    assert str(tmp_path) in f.detail and "exist" in f.detail, f.detail
    assert f.fix is None


def test_an_unreadable_file_says_so(host, monkeypatch):
    real = Path.read_text

    def denied(self, *a, **k):
        if self.name == "enabled":
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", denied)
    f = read(Thp, host)
    assert f.state is State.UNREADABLE and "not readable by this user" in f.detail


# --------------------------------------------------------------------------- one knob at a time

def test_governor(host):
    write(host, "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave")
    write(host, "sys/devices/system/cpu/cpu1/cpufreq/scaling_min_freq", "800000")
    f = read(Governor, host, cpus=(0, 1))
    assert f.state is State.WARN and "powersave" in f.detail and "CPU 1" in f.detail
    assert f.fix == "sudo cpupower -c 1 frequency-set -g performance"
    assert "800–3500 MHz (CPU 1)" in f.value and f.readings["governor"] == {"0": "performance", "1": "powersave"}
    for c in range(4):
        for p in (host / f"sys/devices/system/cpu/cpu{c}/cpufreq").iterdir():
            p.unlink()
        (host / f"sys/devices/system/cpu/cpu{c}/cpufreq").rmdir()
    f = read(Governor, host)
    assert f.state is State.UNREADABLE and "no cpufreq driver" in f.detail


def test_cstates(host):
    assert read(CStates, host).value.startswith("intel_idle: POLL 0 µs, C1 2 µs, C6 133 µs (disabled)")
    write(host, "sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "0")
    f = read(CStates, host)
    assert f.state is State.WARN and f.detail == "CPU 1 may sleep in C6 (133 µs to wake)"
    assert "idle-set -D 3" in f.fix and f.readings["cmdline"] == {"intel_idle.max_cstate": "1"}
    write(host, "proc/cmdline", "root=/dev/sda1 idle=poll")
    assert read(CStates, host).state is State.OK
    write(host, "proc/cmdline", "root=/dev/sda1")
    for p in sorted((host / "sys/devices/system/cpu/cpu1/cpuidle").rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    assert read(CStates, host).state is State.UNREADABLE


def test_turbo(host):
    write(host, "sys/devices/system/cpu/intel_pstate/no_turbo", "0")
    f = read(Turbo, host)
    assert f.state is State.WARN and f.fix == "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
    (host / "sys/devices/system/cpu/intel_pstate/no_turbo").unlink()
    write(host, "sys/devices/system/cpu/cpufreq/boost", "1")
    assert read(Turbo, host).state is State.WARN
    write(host, "sys/devices/system/cpu/cpufreq/boost", "0")
    assert read(Turbo, host).value == "turbo off (cpufreq boost)"
    (host / "sys/devices/system/cpu/cpufreq/boost").unlink()
    f = read(Turbo, host)
    assert f.state is State.UNREADABLE and "no_turbo" in f.detail and "boost" in f.detail


def test_smt(host):
    f = read(Smt, host, sample=sample(host, busy={3: 40}))
    assert f.state is State.WARN and f.detail == "CPU 1's sibling 3 was 40% busy" and "smt/control" in f.fix
    assert read(Smt, host, cpus=(1, 3)).detail == "CPU 1's sibling 3 is tailwise's too; CPU 3's sibling 1 is tailwise's too"
    for c in range(4):
        write(host, f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list", str(c))
    assert read(Smt, host).value == "no SMT sibling of CPU 1; SMT on"


def test_isolation(host):
    f = read(Isolation, host)
    assert f.state is State.OK and f.value == "isolated 1; nohz_full 1; rcu_nocbs 1"
    f = read(Isolation, host, cpus=(2, 3))
    assert f.state is State.WARN and f.fix == "taskset -c 1 tailwise …" and "CPU 2-3" in f.detail
    write(host, "sys/devices/system/cpu/isolated", "")
    (host / "sys/devices/system/cpu/nohz_full").unlink()
    f = read(Isolation, host, cpus=(3,))
    assert "nohz_full none (not built in)" in f.value
    assert f.fix == "boot with isolcpus=3 nohz_full=3 rcu_nocbs=3, then taskset -c 3 tailwise …"
    write(host, "sys/devices/system/cpu/online", "0")
    assert read(Isolation, host, cpus=()).state is State.NOT_APPLICABLE


def test_nic_numa(host):
    assert read(NicNuma, host).value == "eth9 on node 0 (CPU 0-1); tailwise's CPU 1"
    f = read(NicNuma, host, cpus=(3,))
    assert f.state is State.WARN and f.fix == "taskset -c 0-1 tailwise …" and "remote" in f.detail
    f = read(NicNuma, host, iface="lo")
    assert f.state is State.NOT_APPLICABLE and "virtual" in f.detail
    f = read(NicNuma, host, iface=None, iface_note="no route to 10.0.0.1:7: unreachable")
    assert f.state is State.NOT_APPLICABLE and f.detail == "no route to 10.0.0.1:7: unreachable"
    assert read(NicNuma, host, iface="eth7").state is State.UNREADABLE
    write(host, "sys/devices/pci0000:00/0000:00:03.0/numa_node", "-1")
    f = read(NicNuma, host)
    assert f.state is State.UNREADABLE and "no NUMA node" in f.detail
    write(host, "sys/devices/system/node/online", "0")
    assert read(NicNuma, host).state is State.NOT_APPLICABLE


def test_thp(host):
    write(host, "sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never")
    f = read(Thp, host)
    assert f.state is State.WARN and f.value == "enabled always, defrag madvise"
    assert f.fix == "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled"


def test_coalescing(host, monkeypatch):
    c = dict.fromkeys(d._COALESCE_FIELDS, 0) | {"rx_usecs": 50, "rx_frames": 0}
    monkeypatch.setattr(Coalescing, "query", staticmethod(lambda iface: c))
    f = read(Coalescing, host)
    assert f.state is State.WARN and "50 µs" in f.detail and f.fix == "sudo ethtool -C eth9 adaptive-rx off rx-usecs 0"
    c.update(rx_usecs=0, adaptive_rx=1)
    assert "adaptive-rx" in read(Coalescing, host).detail
    assert read(Coalescing, host, iface="lo").state is State.NOT_APPLICABLE


def test_coalescing_asks_the_kernel(host):
    """The real ioctl: an interface this kernel does not have is unreadable, with the errno."""
    (host / "sys/class/net/tw-none0").mkdir()
    (host / "sys/class/net/tw-none0/device").symlink_to("../../../devices/pci0000:00/0000:00:03.0")
    f = read(Coalescing, host, iface="tw-none0")
    assert f.state is State.UNREADABLE and "ETHTOOL_GCOALESCE on tw-none0" in f.detail and "errno 19" in f.detail


def test_irq_affinity(host):
    """eth9's queues are its device's MSI interrupts and the lines named after it (not eth90's)."""
    f = read(IrqAffinity, host, cpus=(1, 2))
    assert f.value == "eth9: IRQ 40 → CPU 0, IRQ 41 → CPU 2 (allowed 0,2-3)"
    assert f.state is State.WARN and f.detail == "IRQ 41 of eth9 run on tailwise's CPU 1-2"
    assert f.fix.startswith("echo 0,3 | sudo tee /proc/irq/{41}/smp_affinity_list")
    assert read(IrqAffinity, host, cpus=(1,)).state is State.OK
    f = read(IrqAffinity, host, cpus=(0, 1, 2, 3))
    assert f.state is State.WARN and "no CPU is free" in f.fix
    (host / "sys/devices/pci0000:00/0000:00:03.0/msi_irqs/40").unlink()
    write(host, "proc/interrupts", "  CPU0\n 41:  1  PCI-MSIX  eth9-rx\n")
    assert list(read(IrqAffinity, host).readings["irqs"]) == ["41"]


def test_busy_poll_is_information(host):
    assert read(BusyPoll, host).value == "busy_read 50 µs, busy_poll 50 µs"
    write(host, "proc/sys/net/core/busy_read", "0")
    write(host, "proc/sys/net/core/busy_poll", "0")
    f = read(BusyPoll, host)
    assert f.state is State.OK and "information" in f.detail and "busy_read=50" in f.fix


def test_clocksource(host):
    write(host, "sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet")
    f = read(Clocksource, host)
    assert f.state is State.WARN and "system call" in f.detail
    assert f.fix == "echo tsc | sudo tee /sys/devices/system/clocksource/clocksource0/current_clocksource"
    write(host, "sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc")
    write(host, "proc/cpuinfo", "flags\t: fpu tsc constant_tsc\n")
    f = read(Clocksource, host)
    assert f.state is State.WARN and f.detail == "the TSC lacks nonstop_tsc"
    write(host, "proc/cpuinfo", "Features\t: fp asimd\n")  # no TSC flags to read: an arm64 machine
    assert read(Clocksource, host).readings["tsc_flags"] is None


def test_steal_and_other_load_from_a_sample(host):
    s = sample(host, busy={1: 30, 2: 80}, steal={0: 4, 1: 2})
    steal = read(Steal, host, sample=s)
    assert steal.state is State.WARN and steal.readings["steal_share"] == 0.015
    assert steal.value == "1.5% of the CPU time over 0.5 s (CPU 1 2.0%)"
    load = read(OtherLoad, host, sample=s)
    assert load.state is State.WARN and load.readings["cpus"] == {"1": 0.3}
    assert load.detail.startswith("CPU 1 30% busy") and "taskset" in load.fix
    assert read(OtherLoad, host, cpus=(0,), sample=s).state is State.OK
    quiet = sample(host, busy={1: 5})
    assert read(Steal, host, sample=quiet).state is State.OK and read(OtherLoad, host, sample=quiet).state is State.OK


def test_the_sample_is_taken_once_and_shared(host):
    waits = []
    s = CpuSample(host, 0.25, wait=waits.append)
    ctx = Context(iface="eth9", cpus=frozenset({1}), sample=s)
    Steal(host, ctx).read(), OtherLoad(host, ctx).read(), Smt(host, ctx).read()
    assert waits == [0.25]


def test_an_unusable_stat_is_unreadable(host):
    write(host, "proc/stat", "cpu  1 2 3 4 5 6 7\n")
    f = read(Steal, host, sample=CpuSample(host, 0))
    assert f.state is State.UNREADABLE and "no steal column" in f.detail
    write(host, "proc/stat", STAT_BEFORE)
    f = read(OtherLoad, host, sample=CpuSample(host, 0))
    assert f.state is State.UNREADABLE and "no CPU time passed" in f.detail


# --------------------------------------------------------------------------- parsing

def test_parse_stat_and_shares():
    before = parse_stat(STAT_BEFORE)
    assert set(before) == {"cpu", "cpu0", "cpu1", "cpu2", "cpu3"} and before["cpu0"][:3] == [250, 0, 125]
    shares = stat_shares(before, parse_stat(_stat_after({0: 50}, {0: 10})))
    assert shares["cpu0"].busy == 0.5 and shares["cpu0"].steal == 0.1 and shares["cpu0"].ticks == 100
    assert shares["cpu"].busy == 50 / 400 and shares["cpu1"].busy == 0


def test_cmdline_stops_where_init_s_arguments_start():
    got = cmdline("BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,2-3 nohz_full=2-3 quiet -- --init idle=poll")
    assert got == {"BOOT_IMAGE": "/vmlinuz", "isolcpus": "managed_irq,2-3", "nohz_full": "2-3", "quiet": ""}


def test_cpu_text_and_default_interface(host, tmp_path):
    assert cpu_text({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8" and cpu_text(()) == ""
    assert default_interface(host) == "eth9"
    assert default_interface(tmp_path / "nothing") is None


# --------------------------------------------------------------------------- what a run is warned about

def test_a_run_is_warned_only_about_the_knobs_that_matter_for_it(host, monkeypatch):
    write(host, "sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never")
    write(host, "sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "0")
    write(host, "sys/devices/system/cpu/isolated", "")
    write(host, "proc/sys/net/core/busy_read", "0")
    for c in range(4):  # no SMT: the siblings' load is not sampled (sample_s=0 samples nothing)
        write(host, f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list", str(c))
    monkeypatch.setattr(Coalescing, "query", staticmethod(
        lambda iface: dict.fromkeys(d._COALESCE_FIELDS, 0) | {"adaptive_rx": 1}))
    doc = Doctor(host, iface="eth9", cpus={1}, sample_s=0)
    warn = {f.name for f in doc.facts() if f.state is State.WARN}
    assert warn == {"thp", "cstates", "isolation", "coalescing"}
    names = lambda shape: [f.name for f in doc.warnings(shape)]  # noqa: E731
    # Isolation is named by the stalls check's remedy when the stalls show; busy-poll is information.
    assert names(RunShape(spinning=True, sleeping=False, nic=False)) == ["thp"]
    assert names(RunShape(spinning=False, sleeping=True, nic=False)) == ["cstates", "thp"]
    assert names(RunShape(spinning=True, sleeping=False, nic=True)) == ["thp", "coalescing"]
    assert [f.name for f in doc.facts()] == [k.name for k in KNOBS]
