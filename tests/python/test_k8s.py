"""configs/k8s/: the sidecar pod and the DaemonSet. No cluster runs here: their YAML parses, each
feedscope command and flag they run is one `feedscope --help` and its subcommand's help list, the
sidecar holds CAP_SYS_PTRACE alone and its port is the one its annotations name. Then the sidecar's
own command as the manifest gives it runs in a PID namespace of its own (unshare --pid
--mount-proc, as a pod with shareProcessNamespace), started before the trainer as a pod may start
them, with CAP_SYS_PTRACE its only capability: it finds the trainer by name, reads it until it ends
and writes its report. Without the capability the kernel refuses, and attach says which right is
missing."""

import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
K8S = HERE.parent.parent / "configs" / "k8s"
TRAINER = HERE / "try_target.py"  # a Python loop that prints its rate: the pod's train.py
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

try:
    import yaml
except ImportError:
    yaml = None

# The pod: the sidecar from its JSON argv (never on its own command line, which would match
# "train.py"), then 1 s later the trainer, as two containers may start; PID 1 waits for both.
POD = """
import json, subprocess, sys, time
spec = json.load(open(sys.argv[1]))
sidecar = subprocess.Popen(spec["sidecar"], stdout=open(spec["log"], "w"), stderr=subprocess.STDOUT)
time.sleep(1)
trainer = subprocess.Popen(spec["trainer"], stdout=subprocess.DEVNULL)
trainer.wait()
sys.exit(sidecar.wait())
"""


def manifests():
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        docs[path.name] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def containers(doc):
    spec = doc["spec"]["template"]["spec"] if doc["kind"] == "DaemonSet" else doc["spec"]
    return spec, spec["containers"]


def feedscope_commands(container):
    """Every feedscope command line a container runs: its command and args, or the commands its
    shell script runs."""
    argv = list(container.get("command", [])) + list(container.get("args", []))
    if argv and argv[0] == "feedscope":
        return [argv]
    if argv[:2] in (["/bin/sh", "-c"], ["sh", "-c"]):
        script = argv[2].replace("\\\n", " ")
        return [shlex.split(m) for m in re.findall(r"\bfeedscope\s[^|&;\n]*", script)]
    return []


def have_namespaces():
    """Whether this machine lets the test make a PID and network namespace (root, unshare, setpriv)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--net", "true"], capture_output=True)
    return r.returncode == 0


def help_of(*words):
    r = subprocess.run([FEEDSCOPE, *words, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(yaml, "no PyYAML: Debian package python3-yaml (scripts/setup.sh installs it)")
class KubernetesManifestsTest(unittest.TestCase):
    def test_manifests_parse_and_run_only_what_feedscope_has(self):
        docs = manifests()
        self.assertEqual(sorted(docs), ["feedscope-daemonset.yaml", "feedscope-sidecar.yaml"])
        top = help_of()
        helps = {}
        seen = 0
        for name, objects in docs.items():
            for doc in objects:
                _, cs = containers(doc)
                for c in cs:
                    for argv in feedscope_commands(c):
                        seen += 1
                        sub = argv[1]
                        self.assertRegex(top, rf"\n\s+{sub}\s", f"{name}: feedscope {sub}")
                        helps.setdefault(sub, help_of(sub))
                        for word in argv[2:]:
                            flag = word.split("=")[0]
                            if flag.startswith("--"):
                                self.assertRegex(helps[sub], rf"{re.escape(flag)}\b", f"{name}: {' '.join(argv)}")
        self.assertEqual(seen, 3, "the sidecar's attach, the DaemonSet's --list and its attach")

    def test_only_ptrace_and_the_ports_prometheus_is_told(self):
        docs = manifests()
        pod = docs["feedscope-sidecar.yaml"][0]
        spec, cs = containers(pod)
        self.assertTrue(spec["shareProcessNamespace"])
        sidecar = [c for c in cs if feedscope_commands(c)][0]
        argv = feedscope_commands(sidecar)[0]
        port = argv[argv.index("--metrics-addr") + 1].rsplit(":", 1)[1]
        self.assertEqual(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true")
        self.assertEqual(pod["metadata"]["annotations"]["prometheus.io/port"], port)
        self.assertEqual([p["containerPort"] for p in sidecar["ports"]], [int(port)])
        daemonset = docs["feedscope-daemonset.yaml"][0]
        dspec, (agent,) = containers(daemonset)
        self.assertTrue(dspec["hostPID"])
        self.assertEqual([p["containerPort"] for p in agent["ports"]], list(range(9464, 9472)),
                         "one port a slot of the script's 8")
        self.assertIn("for slot in 0 1 2 3 4 5 6 7;", agent["args"][0])
        for c in (sidecar, agent):
            security = c["securityContext"]
            self.assertEqual(security["capabilities"], {"drop": ["ALL"], "add": ["SYS_PTRACE"]})
            self.assertNotIn("privileged", security)
            self.assertFalse(security["allowPrivilegeEscalation"])


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(yaml, "no PyYAML: Debian package python3-yaml (scripts/setup.sh installs it)")
@unittest.skipUnless(have_namespaces(), "needs root, unshare and setpriv (util-linux): a PID and a network "
                     "namespace, and capabilities")
class SidecarInAPidNamespaceTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="feedscope-k8s-")
        self.addCleanup(self._tmp.cleanup)
        self.dir = pathlib.Path(self._tmp.name)
        shutil.copy(TRAINER, self.dir / "train.py")
        pod = manifests()["feedscope-sidecar.yaml"][0]
        self.sidecar = feedscope_commands([c for c in containers(pod)[1] if feedscope_commands(c)][0])[0]

    def test_the_sidecar_finds_the_trainer_by_name_with_ptrace_alone(self):
        argv = list(self.sidecar)
        argv[0] = FEEDSCOPE
        argv[argv.index("--report-dir") + 1] = str(self.dir / "report")
        argv[argv.index("--wait") + 1] = "60"
        spec = {"sidecar": ["setpriv", "--bounding-set", "-all,+sys_ptrace", *argv],
                "trainer": [sys.executable, str(self.dir / "train.py"), "--steps", "30"],
                "log": str(self.dir / "sidecar.log")}
        (self.dir / "pod.json").write_text(json.dumps(spec))
        (self.dir / "pod.py").write_text(POD)
        # --net: the sidecar's 0.0.0.0:9464 is the pod's own, as in a pod.
        r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--net", sys.executable,
                            str(self.dir / "pod.py"), str(self.dir / "pod.json")],
                           capture_output=True, text=True, timeout=120)
        log = (self.dir / "sidecar.log").read_text()
        self.assertEqual(r.returncode, 0, r.stderr + log)
        found = re.search(r"--name 'train\.py' is pid (\d+): (.*)", log)
        self.assertTrue(found, log)
        self.assertLess(int(found.group(1)), 100, "a PID of the pod's own namespace")
        self.assertIn("train.py --steps 30", found.group(2))
        report = json.loads((self.dir / "report" / "report.json").read_text())
        self.assertTrue(report["program"]["attached"])
        self.assertEqual(report["program"]["pid"], int(found.group(1)))
        self.assertEqual(report["program"]["ended"], "ended", "read until the trainer ended (--duration 0)")
        self.assertEqual(report["config"]["metrics_addr"], "0.0.0.0:9464")

    def test_without_ptrace_the_kernel_refuses_and_attach_says_so(self):
        trainer = subprocess.Popen([sys.executable, str(self.dir / "train.py"), "--steps", "100"],
                                   stdout=subprocess.DEVNULL)
        self.addCleanup(trainer.wait)
        self.addCleanup(trainer.kill)
        time.sleep(0.5)
        probe = subprocess.run(["setpriv", "--bounding-set", "-all", "cat", f"/proc/{trainer.pid}/environ"],
                               capture_output=True)
        if probe.returncode == 0:
            self.skipTest("this kernel lets a process without capabilities read a fuller one's environ")
        r = subprocess.run(["setpriv", "--bounding-set", "-all", FEEDSCOPE, "attach", "--duration", "1",
                            "--report-dir", str(self.dir / "refused"), str(trainer.pid)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"no right to read process {trainer.pid}", r.stderr)
        self.assertIn("CAP_SYS_PTRACE", r.stderr)


if __name__ == "__main__":
    unittest.main()
