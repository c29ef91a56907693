"""Issue 21, item 6: deploy/ — the agent's image recipe, Kubernetes manifests and systemd unit.

* The manifests (deploy/kubernetes/*.yaml) validate against the Kubernetes 1.37 schemas with
  kubeconform ``-strict`` (no unknown field), and a copy with a misspelt field or a wrong type is
  rejected: the check can fail. scripts/test builds kubeconform with its schemas
  (scripts/kubeconform) and sets TAILWISE_KUBECONFORM; without that variable these tests skip,
  unless CI is set, when they fail saying why. Locally: ``TAILWISE_KUBECONFORM=$(bash scripts/kubeconform)``.
* The manifests say what deploy/README.md promises: host networking, Guaranteed QoS with whole
  CPUs, the token from a Secret mounted read-only, probes, a locked-down securityContext, one set
  of labels, the NetworkPolicy selecting the agents, one port everywhere.
* The systemd unit parses (its keys, and ``systemd-analyze verify`` where that exists).
* The Containerfile's ENTRYPOINT and every agent command line in deploy/ use only the flags of
  ``tailwise agent``'s contract (and, once that command exists, flags its --help lists).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from support.cli import run_cli
from support.servers import in_ci

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
UNIT = DEPLOY / "systemd" / "tailwise-agent@.service"
CONTAINERFILE = DEPLOY / "Containerfile"
ENV = "TAILWISE_KUBECONFORM"
TIMEOUT_S = 60

#: `tailwise agent`'s command line (issues 21, 33); deploy/ gives each but --insecure-plaintext a value.
CONTRACT_FLAGS = {"--listen", "--token-file", "--tls-cert", "--tls-key", "--tls-client-ca", "--insecure-plaintext",
                  "--allow-targets", "--max-rate", "--max-conns", "--max-duration", "--lease", "--cpus", "--max-memory"}
PORT = 7100
LABELS = {"app.kubernetes.io/name": "tailwise-agent", "app.kubernetes.io/part-of": "tailwise",
          "app.kubernetes.io/component": "agent"}


# --------------------------------------------------------------------------- helpers

def kubeconform() -> str:
    """The kubeconform that scripts/kubeconform built (with its local schemas)."""
    path = os.environ.get(ENV)
    if not path:
        if in_ci():
            pytest.fail(f"{ENV} is not set in CI: scripts/test sets it from scripts/kubeconform "
                        f"(see that script's message in scripts/test's output)")
        pytest.skip(f"{ENV} is not set: scripts/test builds kubeconform and sets it "
                    f"(locally: {ENV}=$(bash scripts/kubeconform))")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{ENV}={path} is not an executable: scripts/kubeconform builds it from the Go module "
                    f"proxy and PyPI (see its message in scripts/test's output)")
    return path


def validate(*files: Path) -> tuple[subprocess.CompletedProcess, dict]:
    names = [str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f) for f in files]
    r = subprocess.run([kubeconform(), "-strict", "-summary", "-verbose", "-output", "json", *names],
                       capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"kubeconform printed no JSON report (exit {r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return r, report


def documents() -> list[tuple[Path, dict]]:
    return [(path, doc) for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(kind: str) -> list[dict]:
    return [doc for _, doc in documents() if doc["kind"] == kind]


def workloads() -> list[dict]:
    found = by_kind("DaemonSet") + by_kind("Job")
    assert {d["kind"] for d in found} == {"DaemonSet", "Job"}, "deploy/kubernetes/ has a DaemonSet and a Job"
    return found


def agent_container(workload: dict) -> dict:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: one container, the agent"
    return containers[0]


def flag_values(args: list[str]) -> dict[str, str]:
    """``--flag value`` (or ``--flag=value``) pairs of a command line; every flag takes a value."""
    out: dict[str, str] = {}
    it = iter(args)
    for word in it:
        assert word.startswith("--"), f"{word!r} is not a flag (every option of tailwise agent takes --name value)"
        name, eq, value = word.partition("=")
        if not eq:
            value = next(it, None)
            assert value is not None and not value.startswith("--"), f"{name} has no value in {args}"
        assert name not in out, f"{name} given twice in {args}"
        out[name] = value
    return out


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file: section → key → values (a key may repeat), comments and blank lines
    skipped, continuation lines joined."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    lines = iter(text.splitlines())
    for line in lines:
        while line.endswith("\\"):
            line = line[:-1] + " " + next(lines, "")
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            assert stripped.endswith("]"), f"bad section line {line!r}"
            current = sections.setdefault(stripped[1:-1], {})
            continue
        assert current is not None, f"{line!r} outside any section"
        key, eq, value = stripped.partition("=")
        assert eq and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key.strip()), f"not KEY=value: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


# --------------------------------------------------------------------------- kubeconform

def test_manifests_validate_against_kubernetes_schemas():
    assert MANIFESTS, "deploy/kubernetes/ has no *.yaml"
    r, report = validate(*MANIFESTS)
    expected = {(path.relative_to(ROOT).as_posix(), doc["kind"], doc["metadata"]["name"]) for path, doc in documents()}
    seen = {(res["filename"], res["kind"], res["name"]): res for res in report["resources"]}
    bad = [f"{key}: {res['status']} {res['msg']}" for key, res in seen.items() if res["status"] != "statusValid"]
    assert not bad, "kubeconform -strict rejects:\n" + "\n".join(bad)
    assert set(seen) == expected, f"kubeconform checked {sorted(seen)}, the files hold {sorted(expected)}"
    assert report["summary"] == {"valid": len(expected), "invalid": 0, "errors": 0, "skipped": 0}, report["summary"]
    assert r.returncode == 0, r.stderr[-2000:]


BREAKAGES = {
    # A misspelt field: only -strict (additionalProperties: false) catches it.
    "misspelt field": ("daemonset.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true",
                       "readOnlyRootFileSystem"),
    # An argument that YAML reads as a number: the API server would refuse it.
    "number as an argument": ("job.yaml", '- "1024"', "- 1024", "args"),
    # A field in the wrong place: hostNetwork belongs to the pod, not the container.
    "field in the wrong object": ("job.yaml", "          imagePullPolicy: IfNotPresent",
                                  "          imagePullPolicy: IfNotPresent\n          hostNetwork: true", "hostNetwork"),
}


@pytest.mark.parametrize("breakage", BREAKAGES, ids=list(BREAKAGES))
def test_broken_manifest_is_rejected(tmp_path, breakage):
    name, old, new, named = BREAKAGES[breakage]
    text = (DEPLOY / "kubernetes" / name).read_text()
    assert old in text, f"{name} no longer has {old!r}: update this test"
    broken = tmp_path / name
    broken.write_text(text.replace(old, new, 1))
    r, report = validate(broken)
    assert r.returncode != 0, f"kubeconform -strict accepted {breakage}: {r.stdout[-2000:]}"
    assert report["summary"]["invalid"] == 1 and report["summary"]["valid"] == 0, report["summary"]
    msg = report["resources"][0]["msg"]
    assert named in msg, f"the error does not name {named!r}: {msg}"


# --------------------------------------------------------------------------- what the manifests promise

def test_labels_namespace_and_selectors_agree():
    docs = documents()
    for path, doc in docs:
        labels = doc["metadata"].get("labels", {})
        assert labels.get("app.kubernetes.io/part-of") == "tailwise", f"{path.name}: {doc['kind']} lacks part-of: tailwise"
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == "tailwise", f"{path.name}: {doc['kind']} not in namespace tailwise"
            for key, value in LABELS.items():
                assert labels.get(key) == value, f"{path.name}: {doc['kind']} label {key} is {labels.get(key)!r}, not {value!r}"
    assert [d["metadata"]["name"] for d in by_kind("Namespace")] == ["tailwise"]

    (policy,) = by_kind("NetworkPolicy")
    selector = policy["spec"]["podSelector"]["matchLabels"]
    instances = set()
    for w in workloads():
        pod_labels = w["spec"]["template"]["metadata"]["labels"]
        assert pod_labels.items() >= LABELS.items(), f"{w['kind']}: pod labels {pod_labels}"
        assert pod_labels.items() >= selector.items(), f"the NetworkPolicy does not select the {w['kind']}'s pods"
        if "selector" in w["spec"]:
            assert pod_labels.items() >= w["spec"]["selector"]["matchLabels"].items(), f"{w['kind']}: selector ≠ pod labels"
        instances.add(pod_labels["app.kubernetes.io/instance"])
    assert len(instances) == 2, "the DaemonSet's and the Job's pods differ in app.kubernetes.io/instance"


def test_agents_run_as_deploy_readme_says():
    secrets = {d["metadata"]["name"]: d for d in by_kind("Secret")}
    secret, tls = secrets["tailwise-agent-token"], secrets["tailwise-agent-tls"]
    token_key = next(iter(secret["stringData"]))
    assert tls["type"] == "kubernetes.io/tls" and set(tls["stringData"]) == {"tls.crt", "tls.key"}
    for w in workloads():
        what = w["kind"]
        pod = w["spec"]["template"]["spec"]
        c = agent_container(w)
        assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet", what
        assert pod.get("automountServiceAccountToken") is False, what
        assert "command" not in c, f"{what}: the image's ENTRYPOINT (tailwise agent) must stay"

        # Guaranteed QoS with whole CPUs: the static CPU manager gives the container cores of its own.
        res = c["resources"]
        assert res["requests"] == res["limits"], f"{what}: requests ≠ limits: not Guaranteed QoS"
        assert set(res["limits"]) >= {"cpu", "memory"}, what
        assert re.fullmatch(r"[1-9][0-9]*", str(res["limits"]["cpu"])), f"{what}: cpu {res['limits']['cpu']} is not whole CPUs"

        sc, psc = c["securityContext"], pod["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0, what
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, what
        assert sc.get("privileged", False) is False and sc["capabilities"] == {"drop": ["ALL"]}, what

        # One port everywhere: --listen, containerPort, both probes, the NetworkPolicy.
        flags = flag_values(c["args"])
        assert flags["--listen"].rsplit(":", 1)[1] == str(PORT), what
        assert [p["containerPort"] for p in c["ports"]] == [PORT], what
        for probe in ("readinessProbe", "livenessProbe"):
            assert c[probe]["tcpSocket"]["port"] == PORT, f"{what}: {probe}"

        # The token: a file from the Secret, mounted read-only, named by --token-file.
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        token = volumes["token"]["secret"]
        assert token["secretName"] == secret["metadata"]["name"], what
        assert mounts["token"]["readOnly"] is True, what
        assert flags["--token-file"] == f"{mounts['token']['mountPath']}/{token_key}", what
        # TLS on (issue 33): the key pair from its Secret, required, named by --tls-cert/--tls-key.
        assert volumes["tls"]["secret"]["secretName"] == tls["metadata"]["name"], what
        assert volumes["tls"]["secret"]["optional"] is False and mounts["tls"]["readOnly"] is True, what
        assert flags["--tls-cert"] == f"{mounts['tls']['mountPath']}/tls.crt", what
        assert flags["--tls-key"] == f"{mounts['tls']['mountPath']}/tls.key", what

    # Pod Security: enforced at privileged (hostNetwork) and warned and audited at restricted.
    (ns,) = by_kind("Namespace")
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    # The image: the README says how to pin it by digest.
    assert "@sha256:" in (DEPLOY / "README.md").read_text()

    (policy,) = by_kind("NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": PORT}] and rule["from"], "ingress: the coordinator only"
    text = (DEPLOY / "kubernetes" / "networkpolicy.yaml").read_text()
    assert "hostNetwork" in text and "firewall" in text, "networkpolicy.yaml says where it is not enforced"


# --------------------------------------------------------------------------- systemd

def test_systemd_unit_has_its_keys():
    unit = parse_unit(UNIT.read_text())
    assert set(unit) == {"Unit", "Service", "Install"}, set(unit)
    svc = unit["Service"]
    expect = {"DynamicUser": "yes", "NoNewPrivileges": "yes",
              "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "Restart": "on-failure",
              # Issue 33: the kernel's copy of the allowlist (this host until a drop-in allows
              # the coordinator and the targets), memory and tasks bounded.
              "IPAddressDeny": "any", "IPAddressAllow": "localhost", "MemoryMax": "2G", "TasksMax": "512"}
    for key, value in expect.items():
        assert svc.get(key) == [value], f"[Service] {key}={svc.get(key)}, not {value}"
    assert svc["LoadCredential"][0] == "token:/etc/tailwise/token", svc
    assert set(svc["RestrictAddressFamilies"][0].split()) == {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}
    (exec_start,) = svc["ExecStart"]
    words = shlex.split(exec_start)
    assert words[1] == "agent" and words[0].endswith("/tailwise"), exec_start
    flags = flag_values([w for w in words[2:] if w != "$TAILWISE_AGENT_ARGS"])
    assert flags["--token-file"] == "${CREDENTIALS_DIRECTORY}/token", exec_start
    assert flags["--listen"].endswith(":%i"), "the instance is the port"
    # TLS on (issue 33: an agent on every address refuses plaintext unless told), from credentials.
    assert flags["--tls-cert"] == "${CREDENTIALS_DIRECTORY}/tls.crt", exec_start
    assert flags["--tls-key"] == "${CREDENTIALS_DIRECTORY}/tls.key", exec_start
    assert svc["LoadCredential"][1:] == ["tls.crt:/etc/tailwise/tls.crt", "tls.key:/etc/tailwise/tls.key"], svc
    assert re.search(r"^#CPUAffinity=", UNIT.read_text(), re.M), "CPUAffinity= is there, commented"
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze on this machine (test_systemd_unit_has_its_keys checks the keys)")
    # An instance of the template; the executable is one that exists here (verify checks that
    # ExecStart's program is there, and /opt/tailwise is not on a test machine).
    name = "tailwise-agent@7100.service"
    text = UNIT.read_text()
    assert "ExecStart=/opt/tailwise/bin/tailwise " in text
    shutil.copy(shutil.which("true") or "/bin/true", tmp_path / "tailwise")
    (tmp_path / name).write_text(text.replace("ExecStart=/opt/tailwise/bin/tailwise ", f"ExecStart={tmp_path}/tailwise "))
    r = subprocess.run([analyze, "verify", str(tmp_path / name)], capture_output=True, text=True, timeout=TIMEOUT_S)
    # Unknown keys and bad values are warnings with exit 0: any line about this unit fails.
    about_unit = [line for line in (r.stdout + r.stderr).splitlines() if "tailwise-agent@" in line]
    assert r.returncode == 0 and not about_unit, f"systemd-analyze verify (exit {r.returncode}):\n" + "\n".join(
        about_unit or [r.stderr[-2000:]])


# --------------------------------------------------------------------------- the agent's flags

def deploy_command_lines() -> dict[str, list[str]]:
    """Every `tailwise agent` option list in deploy/: the image's CMD, each workload's args (and
    the args left commented out in them), the unit's ExecStart and its example extra options."""
    lines: dict[str, list[str]] = {}
    text = CONTAINERFILE.read_text()
    lines["Containerfile CMD"] = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
    for w in workloads():
        lines[f"{w['kind']} args"] = agent_container(w)["args"]
    for path in MANIFESTS:
        commented = re.findall(r"^\s*#\s*-\s+(--[\w-]+)\s*$", path.read_text(), re.M)
        if commented:
            lines[f"{path.name} commented args"] = commented
    unit = UNIT.read_text()
    lines["unit ExecStart"] = [w for w in shlex.split(parse_unit(unit)["Service"]["ExecStart"][0])[2:] if w.startswith("--")]
    # The comments' agent options: the example TAILWISE_AGENT_ARGS, and the TLS options to add.
    lines["unit comments"] = re.findall(r"(?<![\w-])(--[a-z][\w-]*)", "\n".join(
        line for line in unit.splitlines() if line.startswith("#") and ("AGENT_ARGS" in line or "--tls" in line)))
    return lines


def test_entrypoint_and_args_use_the_agent_contract():
    text = CONTAINERFILE.read_text()
    entrypoints = re.findall(r"^ENTRYPOINT (.*)$", text, re.M)
    assert [json.loads(e) for e in entrypoints] == [["tailwise", "agent"]], entrypoints
    assert re.search(rf"^EXPOSE {PORT}/tcp$", text, re.M)
    assert re.search(r"^USER 10001:10001$", text, re.M), "a numeric non-root user (runAsNonRoot checks it)"
    for where, args in deploy_command_lines().items():
        flags = {a.partition("=")[0] for a in args if a.startswith("--")}
        assert flags, f"{where}: no flags found (this test's parsing is stale)"
        assert flags <= CONTRACT_FLAGS, f"{where} uses flags outside tailwise agent's contract: {sorted(flags - CONTRACT_FLAGS)}"
    cmd = flag_values(deploy_command_lines()["Containerfile CMD"])
    assert set(cmd) == {"--listen", "--token-file", "--tls-cert", "--tls-key"}, cmd


def test_agent_help_lists_every_flag_deploy_uses():
    r = run_cli("agent", "--help", timeout=60)
    if r.returncode != 0 and "No such command" in r.stdout + r.stderr:
        pytest.skip("`tailwise agent` is not in this build yet: the flags are checked against the contract only")
    assert r.returncode == 0, r.stderr[-2000:]
    used = set().union(*({a.partition("=")[0] for a in args if a.startswith("--")}
                         for args in deploy_command_lines().values()))
    listed = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", r.stdout))
    assert used <= listed, f"deploy/ uses flags `tailwise agent --help` does not list: {sorted(used - listed)}"
