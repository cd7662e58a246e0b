"""A torch.distributed job on two hosts, as a new user runs one: two network namespaces joined by
a veth pair (10.231.53.1 and .2, the test's own hosts), each with a hostname of its own, one
torchrun node in each under `feedscope watch --metrics-addr <its address>:9464`, rank 3 slowed;
node b starts 3 s after node a, as machines do. Then `feedscope merge`: 4 ranks, 2 hosts, rank 3
named, both machines' traces on one clock (the namespaces share the kernel's). A real Prometheus
(Debian's) in node a's namespace scrapes both endpoints: every rank's series with its host, and
the Grafana dashboard's per-rank panels, one per host, each showing that host's ranks. Needs root
(ip netns, unshare); everything it creates is removed when it ends, failed or not."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent.parent
JOB = HERE / "ddp_job.py"
DASHBOARD = SOURCE / "configs" / "grafana" / "feedscope-dashboard.json"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"

try:
    import torch.distributed  # noqa: F401
    HAVE_TORCH = torch.distributed.is_available()
except ImportError:
    HAVE_TORCH = False

# Each host: its namespace's suffix, hostname and address on the veth pair.
HOSTS = (("a", "fs-node-a", "10.231.53.1"), ("b", "fs-node-b", "10.231.53.2"))
METRICS_PORT = 9464
RENDEZVOUS_PORT = 29400
PROMETHEUS_ADDRESS = "127.0.0.1:9090"  # in node a's namespace
NODE_B_DELAY_S = 3

# In a host's namespace: its hostname, a hosts file that names both hosts, then the command.
IN_HOST = 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'

# Prometheus's HTTP API, asked from inside node a's namespace: {name: path} in, {name: answer} out.
ASK_PROMETHEUS = """
import json, sys, urllib.request
answers = {}
for name, path in json.loads(sys.argv[1]).items():
    with urllib.request.urlopen("http://%s" % path, timeout=30) as r:
        answers[name] = json.loads(r.read())
print(json.dumps(answers))
"""


def run(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60)


def have_netns():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
        return False
    probe = f"fsprobe{os.getpid()}"
    if run("ip", "netns", "add", probe, check=False).returncode != 0:
        return False
    run("ip", "netns", "del", probe, check=False)
    return True


class TwoHosts:
    """Two namespaces, a veth pair between them; remove() takes away both and all they ran."""

    def __init__(self, dir):
        tag = str(os.getpid())
        self.ns = {key: f"fs53{key}-{tag}" for key, _, _ in HOSTS}
        self.ifname = {key: f"fsv{tag}{key}" for key, _, _ in HOSTS}
        self.hosts_file = dir / "hosts"
        self.hosts_file.write_text("127.0.0.1 localhost\n" + "".join(f"{ip} {name}\n" for _, name, ip in HOSTS))
        self.processes = []

    def create(self):
        a, b = (key for key, _, _ in HOSTS)
        for key in (a, b):
            run("ip", "netns", "add", self.ns[key])
        run("ip", "link", "add", self.ifname[a], "netns", self.ns[a], "type", "veth",
            "peer", "name", self.ifname[b], "netns", self.ns[b])
        for key, _, ip in HOSTS:
            inside = ("ip", "netns", "exec", self.ns[key])
            run(*inside, "ip", "addr", "add", f"{ip}/30", "dev", self.ifname[key])
            run(*inside, "ip", "link", "set", self.ifname[key], "up")
            run(*inside, "ip", "link", "set", "lo", "up")

    def start(self, key, name, argv, log, env=None):
        """`argv` in host `key`'s namespace, named `name`, its output to `log`."""
        with open(log, "w") as out:
            p = subprocess.Popen(["ip", "netns", "exec", self.ns[key], "unshare", "--uts", "--mount",
                                  "--propagation", "private", "--", "sh", "-c", IN_HOST, "sh", name,
                                  str(self.hosts_file), *argv],
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                 env={**os.environ, **(env or {})})
        self.processes.append(p)
        return p

    def remove(self):
        for p in self.processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for ns in self.ns.values():
            # What is left inside (a process that left the group), then the namespace and its link.
            pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            run("ip", "netns", "del", ns, check=False)


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(HAVE_TORCH, "this python3 has no torch.distributed")
@unittest.skipUnless(os.path.exists(PROMETHEUS), "no Prometheus server: Debian package prometheus "
                     "(scripts/setup.sh installs it)")
@unittest.skipUnless(have_netns(), "needs root with ip netns and unshare (network namespaces)")
class TwoHostsTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="feedscope-two-hosts-")
        self.addCleanup(self._tmp.cleanup)
        self.dir = pathlib.Path(self._tmp.name)
        self.hosts = TwoHosts(self.dir)
        self.addCleanup(self.hosts.remove)
        self.hosts.create()

    def start_prometheus(self):
        targets = ", ".join(f'"{ip}:{METRICS_PORT}"' for _, _, ip in HOSTS)
        conf = self.dir / "prometheus.yml"
        conf.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                        "scrape_configs:\n  - job_name: feedscope\n"
                        f"    static_configs:\n      - targets: [{targets}]\n")
        self.hosts.start("a", "fs-node-a", [PROMETHEUS, f"--config.file={conf}",
                                            f"--storage.tsdb.path={self.dir / 'tsdb'}",
                                            f"--web.listen-address={PROMETHEUS_ADDRESS}"],
                         self.dir / "prometheus.log")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready = subprocess.run(["ip", "netns", "exec", self.hosts.ns["a"], sys.executable, "-c",
                                    "import urllib.request as u; u.urlopen('http://%s/-/ready' % '"
                                    + PROMETHEUS_ADDRESS + "', timeout=2)"], capture_output=True)
            if ready.returncode == 0:
                return
            time.sleep(0.5)
        self.fail("Prometheus did not start: " + (self.dir / "prometheus.log").read_text()[-3000:])

    def ask_prometheus(self, questions):
        r = subprocess.run(["ip", "netns", "exec", self.hosts.ns["a"], sys.executable, "-c", ASK_PROMETHEUS,
                            json.dumps({k: f"{PROMETHEUS_ADDRESS}{v}" for k, v in questions.items()})],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def watch_node(self, node, key, name, ip):
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1",
                    "--nnodes", "2", "--nproc_per_node", "2", "--node_rank", str(node),
                    "--master_addr", HOSTS[0][2], "--master_port", str(RENDEZVOUS_PORT),
                    str(JOB), "--steps", "40", "--slow-rank", "3"]
        report = self.dir / f"node-{key}"
        p = self.hosts.start(key, name, [FEEDSCOPE, "watch", "--report-dir", str(report), "--metrics-addr",
                                         f"{ip}:{METRICS_PORT}", "--", *torchrun],
                             self.dir / f"node-{key}.log", env={"GLOO_SOCKET_IFNAME": self.hosts.ifname[key]})
        return report, p

    def test_a_job_on_two_hosts_merged_scraped_and_on_one_clock(self):
        self.start_prometheus()
        begin = time.time()
        nodes = []
        for node, (key, name, ip) in enumerate(HOSTS):
            if node == 1:
                time.sleep(NODE_B_DELAY_S)
            nodes.append(self.watch_node(node, key, name, ip))
        for report, p in nodes:
            p.wait(timeout=400)
            log = (self.dir / f"{report.name}.log").read_text()
            self.assertEqual(p.returncode, 0, log[-4000:])
        end = time.time()

        reports = [json.loads((report / "report.json").read_text()) for report, _ in nodes]
        for (key, name, _), report in zip(HOSTS, reports):
            self.assertEqual(report["environment"]["hostname"], name)
            self.assertEqual(len(report["ranks"]), 2, report["job"])

        job_dir = self.dir / "job"
        merged = subprocess.run([FEEDSCOPE, "merge", "--report-dir", str(job_dir),
                                 *(str(report) for report, _ in nodes)],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(merged.returncode, 0, merged.stderr)
        job = json.loads((job_dir / "report.json").read_text())
        self.assertEqual([r["rank"] for r in job["ranks"]], [0, 1, 2, 3])
        self.assertEqual(job["job"]["hosts"], ["fs-node-a", "fs-node-b"])
        self.assertEqual({(r["host"], r["rank"]) for r in job["ranks"]},
                         {("fs-node-a", 0), ("fs-node-a", 1), ("fs-node-b", 2), ("fs-node-b", 3)})
        self.assertEqual(job["diagnosis"]["straggler"]["rank"], 3, job["diagnosis"]["evidence"])
        self.assertEqual(job["diagnosis"]["straggler"]["host"], "fs-node-b")
        self.check_one_clock(job_dir, nodes)
        self.check_scraped_series(begin, end)

    def check_one_clock(self, job_dir, nodes):
        """DDP's ranks end together: on the job's clock their tracks end within a second, though node
        b's watch, and so its time 0, began 3 s after node a's."""
        trace = json.loads((job_dir / "trace.json").read_text())
        bases = [json.loads((report / "trace.json").read_text())["baseTimeNanoseconds"] for report, _ in nodes]
        self.assertEqual(trace["baseTimeNanoseconds"], min(bases))
        self.assertGreater((bases[1] - bases[0]) / 1e9, NODE_B_DELAY_S - 0.5)
        ends = {}
        for e in trace["traceEvents"]:
            if e.get("cat") == "rank" and e["ph"] == "X":
                ends[e["pid"] - 100000] = (e["ts"] + e["dur"]) / 1e6
        self.assertEqual(sorted(ends), [0, 1, 2, 3], trace["traceEvents"][:5])
        self.assertLess(max(ends.values()) - min(ends.values()), 1.5, ends)

    def check_scraped_series(self, begin, end):
        rng = f"&start={begin:.3f}&end={end:.3f}&step=1"
        dashboard = json.loads(DASHBOARD.read_text())
        repeated = [p for p in dashboard["panels"] if p.get("repeat") == "host"]
        self.assertTrue(repeated, "the per-rank panels repeat by host")
        questions = {"ranks": "/api/v1/query_range?query=feedscope_rank_main_thread_busy_ratio" + rng,
                     "machines": "/api/v1/query_range?query=feedscope_memory_available_bytes" + rng,
                     "hosts": "/api/v1/label/host/values?match[]=feedscope_rank_cpu_cores"
                              f"&start={begin:.3f}&end={end:.3f}"}
        for panel in repeated:
            for target in panel["targets"]:
                for _, name, _ in HOSTS:
                    expr = target["expr"].replace("$host", name).replace("$rank", ".*")
                    questions[f"{panel['id']}/{target['refId']}/{name}"] = (
                        "/api/v1/query_range?query=" + urllib_quote(expr) + rng)
        answers = self.ask_prometheus(questions)
        labels = lambda answer: {(s["metric"]["host"], int(s["metric"]["rank"])) for s in answer["data"]["result"]}
        expected = {("fs-node-a", 0), ("fs-node-a", 1), ("fs-node-b", 2), ("fs-node-b", 3)}
        self.assertEqual(labels(answers["ranks"]), expected, answers["ranks"])
        self.assertEqual({s["metric"]["host"] for s in answers["machines"]["data"]["result"]},
                         {"fs-node-a", "fs-node-b"})
        self.assertEqual(sorted(answers["hosts"]["data"]), ["fs-node-a", "fs-node-b"],
                         "the dashboard's host variable")
        for panel in repeated:
            for target in panel["targets"]:
                self.assertNotIn("{{host}}", target["legendFormat"], "the panel's title names the host")
                for _, name, _ in HOSTS:
                    found = labels(answers[f"{panel['id']}/{target['refId']}/{name}"])
                    mine = {x for x in expected if x[0] == name}
                    self.assertLessEqual(found, mine, f"{target['expr']} on {name}")
                    if "main_thread" in target["expr"] or "workers" in target["expr"]:
                        self.assertEqual(found, mine, f"{target['expr']} on {name}")


def urllib_quote(text):
    from urllib.parse import quote
    return quote(text, safe="")


if __name__ == "__main__":
    unittest.main()
