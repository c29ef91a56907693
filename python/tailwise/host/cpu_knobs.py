"""`tailwise doctor`'s knobs of the processor and the kernel, one class per knob (host/reading.py
says what they share): the frequency governor, C-states, turbo, SMT siblings, core isolation,
transparent huge pages, the clock source, steal and other processes' load.
"""

from __future__ import annotations

from tailwise.host.facts import cpu_list
from tailwise.host.reading import (Fact, Knob, NotApplicable, RunShape, State, Unreadable, cmdline, cpu_text, grouped,
                                   selected)

#: A CPU busy this share of the sample with work that is not tailwise's warns (other-load, smt).
BUSY_SHARE = 0.10
#: Steal above this share of the CPU time warns.
STEAL_SHARE = 0.01
#: The deepest idle state allowed without a warning: its exit latency, µs (C1; C1E is ~10 µs).
CSTATE_MAX_US = 2
#: Clock sources read in the vDSO, without a system call.
VDSO_CLOCKS = ("tsc", "kvm-clock", "hyperv_clocksource_tsc_page", "arch_sys_counter")


class Governor(Knob):
    name = "governor"
    why = ("P-states move the clock under a request: KBNets §4.2 cut p99.99 2.6× with power saving off "
           "(P-states, turbo, C-states)")
    source = "/sys/devices/system/cpu/cpuN/cpufreq/{scaling_governor,scaling_min_freq,scaling_max_freq,scaling_cur_freq}"

    def examine(self) -> Fact:
        cpus = sorted(self.ours())
        first = self.path(f"sys/devices/system/cpu/cpu{cpus[0]}/cpufreq")
        if not first.is_dir():
            raise Unreadable(f"{first} does not exist: no cpufreq driver (a VM, or the firmware sets the frequency)")
        gov, lo, hi, cur = {}, {}, {}, {}
        for c in cpus:
            base = f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_"
            gov[c] = self.text(base + "governor")
            lo[c], hi[c] = int(self.text(base + "min_freq")) // 1000, int(self.text(base + "max_freq")) // 1000
            now = self.optional(base + "cur_freq")
            if now is not None:
                cur[c] = int(now) // 1000
        value = f"{grouped(gov)}; {grouped({c: f'{lo[c]}–{hi[c]} MHz' for c in cpus})}"
        if cur:
            value += f", now {min(cur.values())}–{max(cur.values())} MHz" if len(set(cur.values())) > 1 \
                else f", now {next(iter(cur.values()))} MHz"
        readings = {"governor": {str(c): g for c, g in gov.items()}, "min_mhz": {str(c): v for c, v in lo.items()},
                    "max_mhz": {str(c): v for c, v in hi.items()}, "cur_mhz": {str(c): v for c, v in cur.items()},
                    "driver": self.optional(f"sys/devices/system/cpu/cpu{cpus[0]}/cpufreq/scaling_driver")}
        slow = {c for c, g in gov.items() if g != "performance"}
        if not slow:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, fix=f"sudo cpupower -c {cpu_text(slow)} frequency-set -g performance",
                         detail=f"governor {grouped({c: gov[c] for c in slow})}, not performance, on CPU "
                                f"{cpu_text(slow)}: the clock drops between requests", **readings)


class CStates(Knob):
    name = "cstates"
    why = "waking from a deep C-state adds its exit latency to the request that wakes the CPU: KBNets §4.2 turns C-states off"
    source = "/sys/devices/system/cpu/cpuN/cpuidle/stateM/{name,latency,disable}, /proc/cmdline (max_cstate, idle=)"

    def matters(self, shape: RunShape) -> bool:
        return shape.sleeping

    def examine(self) -> Fact:
        params = cmdline(self.text("proc/cmdline"))
        limits = {k: params[k] for k in ("intel_idle.max_cstate", "processor.max_cstate", "idle", "cpuidle.off")
                  if k in params}
        said = ", ".join(f"{k}={v}" for k, v in limits.items()) or "no C-state limit on the kernel command line"
        if limits.get("idle") == "poll":
            return self.fact(State.OK, f"idle=poll: the CPUs never sleep ({said})", cmdline=limits)
        cpus = sorted(self.ours())
        states = {c: self._states(c) for c in cpus}
        deepest = {c: max(((lat, n) for n, lat, on in st if on), default=(0, "none")) for c, st in states.items()}
        driver = self.optional("sys/devices/system/cpu/cpuidle/current_driver") or "cpuidle"
        shown = ", ".join(f"{n} {lat} µs" + ("" if on else " (disabled)") for n, lat, on in states[cpus[0]])
        value = f"{driver}: {shown}; {said}"
        readings = {"driver": driver, "cmdline": limits,
                    "states": {str(c): [{"name": n, "latency_us": lat, "enabled": on} for n, lat, on in st]
                               for c, st in states.items()}}
        deep = {c for c, (lat, _) in deepest.items() if lat > CSTATE_MAX_US}
        if not deep:
            return self.fact(State.OK, value, **readings)
        worst = max(deepest[c] for c in deep)
        return self.fact(State.WARN, value, detail=f"CPU {cpu_text(deep)} may sleep in {worst[1]} ({worst[0]} µs to wake)",
                         fix=f"sudo cpupower -c {cpu_text(deep)} idle-set -D {CSTATE_MAX_US + 1} (or boot with "
                             f"intel_idle.max_cstate=1 processor.max_cstate=1)", **readings)

    def _states(self, cpu: int) -> list[tuple[str, int, bool]]:
        d = self.path(f"sys/devices/system/cpu/cpu{cpu}/cpuidle")
        if not d.is_dir():
            raise Unreadable(f"{d} does not exist: no cpuidle driver (cpuidle.off=1, or a kernel without cpuidle)")
        dirs = sorted(d.glob("state[0-9]*"), key=lambda p: int(p.name[5:]))
        if not dirs:
            raise Unreadable(f"{d} lists no idle states")
        rel = f"sys/devices/system/cpu/cpu{cpu}/cpuidle/"
        return [(self.text(rel + s.name + "/name"), int(self.text(rel + s.name + "/latency")),
                 self.text(rel + s.name + "/disable") == "0") for s in dirs]


class Turbo(Knob):
    name = "turbo"
    why = ("turbo moves the clock with the load and heat of the other cores: KBNets §3 and Lancet §5 run at "
           "the nominal frequency, turbo off")
    source = "/sys/devices/system/cpu/intel_pstate/no_turbo, else /sys/devices/system/cpu/cpufreq/boost"

    def examine(self) -> Fact:
        no_turbo, boost = "sys/devices/system/cpu/intel_pstate/no_turbo", "sys/devices/system/cpu/cpufreq/boost"
        if self.path(no_turbo).exists():
            on, via, fix = self.text(no_turbo) == "0", "intel_pstate no_turbo", f"echo 1 | sudo tee /{no_turbo}"
        elif self.path(boost).exists():
            on, via, fix = self.text(boost) == "1", "cpufreq boost", f"echo 0 | sudo tee /{boost}"
        else:
            raise Unreadable(f"neither {self.path(no_turbo)} nor {self.path(boost)} exists: no frequency driver here "
                             "exposes turbo")
        value = f"turbo {'on' if on else 'off'} ({via})"
        if not on:
            return self.fact(State.OK, value, turbo=False, via=via)
        return self.fact(State.WARN, value, detail="turbo is on: the clock follows the load", fix=fix, turbo=True, via=via)


class Smt(Knob):
    name = "smt"
    why = ("SMT siblings share a core's pipeline and caches: work on the sibling slows tailwise's thread "
           "(KBNets §3 turns hyperthreading off)")
    source = "/sys/devices/system/cpu/cpuN/topology/thread_siblings_list, /sys/devices/system/cpu/smt/control, /proc/stat"

    def examine(self) -> Fact:
        control = self.optional("sys/devices/system/cpu/smt/control")
        ctl = f"SMT {control}" if control else "no smt/control"
        ours = sorted(self.ours())
        paired = {}
        for c in ours:
            sibs = cpu_list(self.text(f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list")) - {c}
            if sibs:
                paired[c] = sibs
        readings = {"control": control, "siblings": {str(c): sorted(s) for c, s in paired.items()}}
        if not paired:
            return self.fact(State.OK, f"no SMT sibling of CPU {cpu_text(ours)}; {ctl}", **readings)
        value = "; ".join(f"CPU {c} shares its core with {cpu_text(s)}" for c, s in paired.items()) + f"; {ctl}"
        fix = "echo off | sudo tee /sys/devices/system/cpu/smt/control"
        try:
            shares = self.sample.shares()
        except Unreadable as e:
            return self.fact(State.WARN, value, detail=f"whether the siblings are busy is unknown: {e}", fix=fix, **readings)
        busy = []
        for c, sibs in paired.items():
            for s in sorted(sibs):
                share = shares.get(f"cpu{s}")
                if s in self.ctx.cpus:
                    busy.append(f"CPU {c}'s sibling {s} is tailwise's too")
                elif share and share.busy >= BUSY_SHARE:
                    busy.append(f"CPU {c}'s sibling {s} was {share.busy:.0%} busy")
        if not busy:
            return self.fact(State.OK, value + f"; siblings idle over {self.sample.seconds:g} s", **readings)
        return self.fact(State.WARN, value, detail="; ".join(busy), fix=fix + " (or keep the siblings idle)", **readings)


class Isolation(Knob):
    name = "isolation"
    why = ("other tasks, the tick and RCU callbacks on tailwise's cores preempt it: KBNets §4.2 isolates the core "
           "(isolcpus, taskset); nohz_full and rcu_nocbs keep the tick and RCU off it")
    source = "/sys/devices/system/cpu/{isolated,nohz_full}, /proc/cmdline (isolcpus, nohz_full, rcu_nocbs)"

    def matters(self, shape: RunShape) -> bool:
        return False  # the client's stalls name it (methodology/words.client_words) when they show

    def examine(self) -> Fact:
        online = self.online()
        isolated = cpu_list(self.text("sys/devices/system/cpu/isolated"))
        nohz = self.optional("sys/devices/system/cpu/nohz_full")
        params = cmdline(self.text("proc/cmdline"))
        rcu = params.get("rcu_nocbs")
        shown = "none (not built in)" if nohz is None else (nohz if nohz not in ("", "(null)") else "none")
        value = f"isolated {cpu_text(isolated) or 'none'}; nohz_full {shown}; rcu_nocbs {rcu or 'none'}"
        readings = {"isolated": sorted(isolated), "nohz_full": nohz, "rcu_nocbs": rcu, "isolcpus": params.get("isolcpus")}
        if len(online) < 2:
            raise NotApplicable("one CPU: nothing to isolate it from")
        ours = self.ours()
        if ours <= isolated:
            return self.fact(State.OK, value, **readings)
        cpus = cpu_text(self.ctx.cpus) if self.ctx.cpus else "CPUS"
        fix = (f"taskset -c {cpu_text(isolated)} tailwise …" if isolated else
               f"boot with isolcpus={cpus} nohz_full={cpus} rcu_nocbs={cpus}, then taskset -c {cpus} tailwise …")
        return self.fact(State.WARN, value, fix=fix, **readings,
                         detail=f"CPU {cpu_text(ours - isolated)} (tailwise's) not isolated: other tasks may run there")


class Thp(Knob):
    name = "thp"
    why = ("with transparent huge pages always on, faults compact memory and khugepaged collapses pages: stalls "
           "up to ms (KBNets §3 and Lancet §5 turn THP off)")
    source = "/sys/kernel/mm/transparent_hugepage/{enabled,defrag}"

    def examine(self) -> Fact:
        base = "sys/kernel/mm/transparent_hugepage/"
        enabled, defrag = selected(self.text(base + "enabled")), selected(self.text(base + "defrag"))
        value = f"enabled {enabled}, defrag {defrag}"
        wrong, fixes = [], []
        if enabled == "always":
            wrong.append("every anonymous mapping gets huge pages")
            fixes.append(f"echo madvise | sudo tee /{base}enabled")
        if defrag == "always" and enabled != "never":
            wrong.append("a fault stalls in direct compaction")
            fixes.append(f"echo madvise | sudo tee /{base}defrag")
        if not wrong:
            return self.fact(State.OK, value, enabled=enabled, defrag=defrag)
        return self.fact(State.WARN, value, detail="; ".join(wrong), fix="; ".join(fixes), enabled=enabled, defrag=defrag)


class Clocksource(Knob):
    name = "clocksource"
    why = ("every latency is two clock reads: tsc and kvm-clock are read in the vDSO (~20–40 ns), hpet and acpi_pm "
           "by a system call (µs); a TSC without constant_tsc and nonstop_tsc drifts with the clock or C-states")
    source = "/sys/devices/system/clocksource/clocksource0/{current,available}_clocksource, /proc/cpuinfo flags"

    def examine(self) -> Fact:
        base = "sys/devices/system/clocksource/clocksource0/"
        current = self.text(base + "current_clocksource")
        available = (self.optional(base + "available_clocksource") or "").split()
        flags = None
        for line in self.text("proc/cpuinfo").splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
        tsc = {f: f in flags for f in ("constant_tsc", "nonstop_tsc")} if flags is not None else None
        value = f"{current} (available: {' '.join(available) or '?'})"
        if tsc is not None:
            value += "; TSC " + ", ".join(f if on else f"no {f}" for f, on in tsc.items())
        readings = {"current": current, "available": available, "tsc_flags": tsc}
        wrong, fix = [], None
        if current not in VDSO_CLOCKS:
            wrong.append(f"{current} is read by a system call")
            if "tsc" in available:
                fix = f"echo tsc | sudo tee /{base}current_clocksource"
        if current == "tsc" and tsc is not None and not all(tsc.values()):
            wrong.append("the TSC lacks " + " and ".join(f for f, on in tsc.items() if not on))
        if not wrong:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail="; ".join(wrong),
                         fix=fix or "a machine with an invariant TSC (constant_tsc, nonstop_tsc)", **readings)


class Steal(Knob):
    name = "steal"
    why = ("steal is time the hypervisor gave our vCPU to another guest: a request caught in it waits that long, "
           "often ms (KBNets §4.2 measures on cores nothing else uses)")
    source = "/proc/stat (the steal column, read twice over the sample)"

    def examine(self) -> Fact:
        shares = self.sample.shares()
        mine = {c: shares[f"cpu{c}"].steal for c in sorted(self.ours()) if f"cpu{c}" in shares}
        whole = shares["cpu"].steal
        value = f"{whole:.1%} of the CPU time over {self.sample.seconds:g} s"
        if mine:
            value += " (" + ", ".join(f"CPU {c} {s:.1%}" for c, s in mine.items()) + ")"
        readings = {"sample_s": self.sample.seconds, "steal_share": round(whole, 4),
                    "cpus": {str(c): round(s, 4) for c, s in mine.items()}}
        high = {c for c, s in mine.items() if s >= STEAL_SHARE}
        if whole < STEAL_SHARE and not high:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail=f"the hypervisor took {max([whole, *mine.values()]):.1%} of a vCPU",
                         fix="a host whose vCPUs are not shared (dedicated or pinned vCPUs), or a quieter time", **readings)


class OtherLoad(Knob):
    name = "other-load"
    why = ("other processes on the cores tailwise uses preempt its threads: KBNets §4.2 isolates the core so that no "
           "other application runs there")
    source = "/proc/stat (busy ticks per CPU, read twice over the sample while tailwise sleeps)"

    def examine(self) -> Fact:
        shares = self.sample.shares()
        mine = {c: shares[f"cpu{c}"].busy for c in sorted(self.ours()) if f"cpu{c}" in shares}
        whole = shares["cpu"].busy
        value = ", ".join(f"CPU {c} {b:.0%} busy" for c, b in mine.items()) + \
            f"; all CPUs {whole:.0%} over {self.sample.seconds:g} s"
        readings = {"sample_s": self.sample.seconds, "busy_share": round(whole, 4),
                    "cpus": {str(c): round(b, 4) for c, b in mine.items()}}
        busy = {c for c, b in mine.items() if b >= BUSY_SHARE}
        if not busy:
            return self.fact(State.OK, value, **readings)
        shown = ", ".join(f"CPU {c} {mine[c]:.0%}" for c in sorted(busy))
        return self.fact(State.WARN, value, detail=f"{shown} busy with other processes' work",
                         fix=f"find it (ps -eo pid,psr,pcpu,comm --sort=-pcpu | head) and move it off CPU "
                             f"{cpu_text(busy)} (taskset -cp), or measure where it is quiet", **readings)
