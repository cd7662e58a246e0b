"""`srun -n 2 feedscope watch --report-dir R -- python3 ddp_job.py` on a real Slurm: munged,
slurmctld and slurmd of Debian's slurm-wlm 22.05 on loopback, from a slurm.conf generated in the
test's temporary folder (nothing of the machine's own configuration is read or touched; the
daemons are stopped when the test ends, failed or not). DDP on gloo with its rendezvous from
Slurm's variables (MASTER_ADDR and MASTER_PORT exported, rank from SLURM_PROCID), rank 1 slowed:
every task's report in R/rank-N, `feedscope merge R` naming rank 1, each task's metrics port its
own, a second job refused in the same folder, and `watch -- srun` refused with the per-task command.
Without the packages it skips, naming them (scripts/setup.sh installs them)."""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "ddp_job.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

# The programs this test runs and the Debian package of each.
PROGRAMS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client",
            "sinfo": "slurm-client"}


def missing_programs():
    return sorted({pkg for prog, pkg in PROGRAMS.items()
                   if not shutil.which(prog) and not os.path.exists(f"/usr/sbin/{prog}")})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair():
    """A free port whose next is free too: local ranks 0 and 1 listen on PORT and PORT + 1."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no two free ports in a row")


def program(name):
    return shutil.which(name) or f"/usr/sbin/{name}"


SLURM_CONF = """\
ClusterName=feedscope
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctl_port}
SlurmdPort={d_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
PlugStackConfig={dir}/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
# The node's CPUs as configured, whatever this machine has: two tasks fit on a 1-core runner.
SlurmdParameters=config_overrides
NodeName=fsnode NodeAddr=127.0.0.1 NodeHostname={host} CPUs=4 State=UNKNOWN
PartitionName=fs Nodes=fsnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class OneNodeSlurm:
    """munged, slurmctld and slurmd on loopback, everything under `dir`; stop() ends them all."""

    def __init__(self, dir):
        self.dir = pathlib.Path(dir)
        self.daemons = []
        self.dir.mkdir(mode=0o711)
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir()
        (self.dir / "plugstack.conf").write_text("")
        self.conf = self.dir / "slurm.conf"
        self.conf.write_text(SLURM_CONF.format(host=socket.gethostname().split(".")[0], dir=self.dir,
                                               ctl_port=free_port(), d_port=free_port()))
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self):
        d = self.dir
        # -f: munged refuses a key or socket under a world-writable /tmp otherwise.
        self._daemon(program("munged"), "-F", "-f", f"--key-file={d}/munge.key",
                     f"--socket={d}/munge.socket", f"--pid-file={d}/munged.pid",
                     f"--seed-file={d}/munged.seed", f"--log-file={d}/munged.log")
        self._wait(lambda: (d / "munge.socket").exists(), "munged's socket")
        self._daemon(program("slurmctld"), "-D", "-f", str(self.conf))
        self._daemon(program("slurmd"), "-D", "-f", str(self.conf), "-N", "fsnode")
        self._wait(self._node_idle, "the node to be idle in sinfo")

    def _daemon(self, *argv):
        log = open(self.dir / (pathlib.Path(argv[0]).name + ".out"), "w")
        self.daemons.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                             start_new_session=True))
        log.close()

    def _node_idle(self):
        r = subprocess.run([program("sinfo"), "-h", "-o", "%t"], capture_output=True, text=True,
                           env=self.env, timeout=30)
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def _wait(self, ready, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.daemons:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited ({p.returncode}) while waiting for {what}: "
                                       + self.logs())
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}: " + self.logs())

    def logs(self):
        return "\n".join(f"--- {f.name}\n{f.read_text()[-2000:]}" for f in sorted(self.dir.glob("*.out"))
                         if f.exists()) + "".join(
            f"\n--- {f.name}\n{f.read_text()[-2000:]}" for f in sorted(self.dir.glob("*.log")))

    def stop(self):
        for p in reversed(self.daemons):  # slurmd, slurmctld, then munged
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipIf(missing_programs(), "Slurm is not installed: missing Debian packages "
                 + " ".join(missing_programs()) + " (scripts/setup.sh installs them)")
@unittest.skipUnless(os.geteuid() == 0, "slurmd starts tasks as their user only as root")
class SlurmTaskWatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="feedscope-slurm-")
        cls.dir = pathlib.Path(cls._tmp.name)
        os.chmod(cls.dir, 0o711)  # munged wants every folder above its socket searchable by all
        cls.slurm = OneNodeSlurm(cls.dir / "slurm")
        try:
            cls.slurm.start()
        except Exception:
            cls.slurm.stop()
            cls._tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.slurm.stop()
        cls._tmp.cleanup()

    def srun(self, *argv, timeout=300):
        env = {**self.slurm.env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        return subprocess.run([program("srun"), "-n", "2", "--kill-on-bad-exit=1", *argv],
                              capture_output=True, text=True, timeout=timeout, cwd=self.dir, env=env)

    def test_every_task_watched_merged_and_a_second_job_refused(self):
        r_dir = self.dir / "R"
        port = free_port_pair()
        r = self.srun(FEEDSCOPE, "watch", "--report-dir", str(r_dir), "--metrics-addr",
                      f"127.0.0.1:{port}", "--", sys.executable, str(JOB), "--steps", "60",
                      "--slow-rank", "1")
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:] + self.slurm.logs())
        for rank in (0, 1):
            report = json.loads((r_dir / f"rank-{rank}" / "report.json").read_text())
            self.assertEqual([x["rank"] for x in report["ranks"]], [rank], report["ranks"])
            self.assertEqual(report["ranks"][0]["rank_source"], "slurm")
            self.assertEqual(report["ranks"][0]["local_rank"], rank)
            self.assertIn(" slurm=", report["job"]["id"])
            self.assertEqual(report["job"]["world_size"], 2)
            self.assertEqual(report["config"]["rank"], rank)
            self.assertEqual(report["config"]["metrics_address"], f"127.0.0.1:{port + rank}",
                             "local rank N listens on PORT + N")

        merged = subprocess.run([FEEDSCOPE, "merge", str(r_dir)], capture_output=True, text=True, timeout=60)
        self.assertEqual(merged.returncode, 0, merged.stderr)
        job = json.loads((r_dir / "report.json").read_text())
        self.assertEqual([x["rank"] for x in job["ranks"]], [0, 1])
        self.assertEqual(job["diagnosis"]["straggler"]["rank"], 1, job["diagnosis"]["evidence"])
        self.assertIn("rank 1 holds the job back", merged.stderr)

        # Another job (the next step) in the same folder: each task refuses, naming its folder.
        again = self.srun(FEEDSCOPE, "watch", "--report-dir", str(r_dir), "--", sys.executable, "-c", "pass",
                          timeout=60)
        self.assertEqual(again.returncode, 2, again.stderr)
        self.assertIn(str(r_dir / "rank-1" / "report.json") + " holds the report of job", again.stderr)
        self.assertIn("--force", again.stderr)

        # srun under watch: its tasks are not watch's descendants; the per-task command instead.
        under = subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(self.dir / "W"), "--",
                                program("srun"), "-n", "2", sys.executable, str(JOB)],
                               capture_output=True, text=True, timeout=60, env=self.slurm.env)
        self.assertEqual(under.returncode, 2, under.stderr)
        self.assertIn("srun's tasks are not its children", under.stderr)
        self.assertIn(f"srun -n 2 feedscope watch --report-dir {self.dir / 'W'} -- {sys.executable} {JOB}",
                      under.stderr)


if __name__ == "__main__":
    unittest.main()
