"""The device check's closing table: one line per case, at most 30, printed last by
scripts/device_check.sh (only the last 12,000 characters of a device call's output come back).

    python3 scripts/device_table.py WORK_DIR [OUT_FILE]

WORK_DIR is the check's work folder: reports/steps.tsv (each step's exit code and seconds),
reports/NAME/report.json of each feedscope run, reports/NAME.log of each step, reports/h2d.json,
ctest-summary.json. Columns: the case, feedscope's verdict, what it predicted, what was measured
(the median of the runs, with their range), and whether the goal was met. A figure that was not
measured reads "not measured"; a case that did not run says why.
"""

import json
import os
import re
import statistics
import sys

WITHIN = 0.25  # a prediction holds when the measured median is within 25 % of it


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Reports:
    def __init__(self, work):
        self.work = work
        self.rep = os.path.join(work, "reports")
        self.steps = {}
        tsv = os.path.join(self.rep, "steps.tsv")
        if os.path.exists(tsv):
            for row in open(tsv):
                name, rc, secs = row.rstrip("\n").split("\t")
                self.steps[name] = (rc, secs)

    def report(self, name):
        return load(os.path.join(self.rep, name, "report.json"))

    def runs(self, name):
        """NAME, or NAME-1, NAME-2, ... where the case ran several times."""
        numbered = sorted(n for n in self.steps if re.fullmatch(re.escape(name) + r"-\d+", n))
        return numbered or ([name] if name in self.steps else [])

    def why_not(self, name):
        rc = self.steps.get(name, ("not run",))[0]
        return "not run" if rc == "not run" else f"no result (exit {rc})"

    def rate(self, name):
        r = self.report(name)
        return (r or {}).get("throughput", {}).get("samples_per_s") or self.printed_rate(name)

    def printed_rate(self, name):
        """The rate the program printed itself ("throughput: N samples/s"), from its step's log."""
        try:
            text = open(os.path.join(self.rep, name + ".log")).read()
        except OSError:
            return None
        found = re.findall(r"throughput: ([0-9.]+) samples/s", text)
        return float(found[-1]) if found else None

    def verdict(self, name):
        r = self.report(name)
        return (r["diagnosis"]["bottleneck"] or "none") if r else self.why_not(name)

    def advice(self, name, prefix):
        for x in ((self.report(name) or {}).get("diagnosis") or {}).get("recommendations", []):
            if x["setting"].startswith(prefix):
                return x
        return None


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, "not measured"
    med = statistics.median(values)
    if len(values) == 1:
        return med, f"{med:.2f}x"
    return med, f"{med:.2f}x ({min(values):.2f}-{max(values):.2f})"


def prediction_row(rs, before, prefix, after, label, base_runs=None):
    """The advice of BEFORE's run against the median of AFTER's runs over BEFORE's rate (or the
    median of BASE_RUNS', where the baseline is measured apart: the GPU untraced, as the CPU runs)."""
    x = rs.advice(before, prefix)
    base = rs.rate(before)
    if base_runs and rs.runs(base_runs):
        base = statistics.median([r for r in map(rs.rate, rs.runs(base_runs)) if r] or [None]) or base
    ratios = [rs.rate(n) / base if base and rs.rate(n) else None for n in rs.runs(after)]
    med, text = spread(ratios)
    if x is None:
        return [label, rs.verdict(before), f"no {prefix} advice", text, "no"]
    p = x.get("predicted_speedup")
    pred = f"{x['setting']}: " + (f"{p:.2f}x" if p else "no figure")
    ok = "yes" if p and med and abs(med / p - 1) <= WITHIN else "no"
    return [label, rs.verdict(before), pred, text, ok + " (within 25 %)" if p and med else "not measured"]


def round_four_rows(rs):
    """Issue #54's fixes on the device: whole steps of a sampled .item() loop, a Session's batches
    with the trace, each DDP rank's own trace, the workers started every epoch."""
    rows = []
    r = rs.report("r4-item-sampled")
    if r is None:
        rows.append([".item() loop sampled 0.5 s in 5, 60 s", rs.why_not("r4-item-sampled"), "", "", "no"])
    else:
        per_step = ((r.get("gpu_trace") or {}).get("syncs") or {}).get("per_step")
        advised = any(x["setting"] == "no per-step sync" for x in r["diagnosis"]["recommendations"])
        ok = per_step is not None and abs(per_step - 1) <= 0.05 and advised
        rows.append([".item() loop sampled 0.5 s in 5, 60 s", rs.verdict("r4-item-sampled"),
                     "no per-step sync" if advised else "no sync advice",
                     f"{per_step:.3f} syncs a step" if per_step is not None else "not measured",
                     "yes (1.0 a step, advised)" if ok else "no"])
    r = rs.report("r4-loader-cuda")
    if r is None:
        rows.append(["feedscope.DataLoader cuda, watched", rs.why_not("r4-loader-cuda"), "", "", "no"])
    else:
        g, t = r.get("gpu_trace") or {}, r.get("throughput") or {}
        device_ms = 1e3 * g["device_s_per_step"] if "device_s_per_step" in g else None
        period_ms = 1e3 * t["wall_s"] / t["steps"] if t.get("steps") else None
        ok = device_ms is not None and period_ms and device_ms <= period_ms * 1.05
        rows.append(["feedscope.DataLoader cuda, watched", rs.verdict("r4-loader-cuda"), "",
                     f"GPU {device_ms:.2f} ms of a {period_ms:.2f} ms batch" if device_ms is not None and period_ms
                     else "not measured", "yes (per batch)" if ok else "no"])
    r = rs.report("r4-ddp")
    if r is None:
        rows.append(["DDP 2 ranks on one GPU, rank 1 slowed", rs.why_not("r4-ddp"), "", "", "no"])
    else:
        s = r["diagnosis"].get("straggler") or {}
        rule = (r["diagnosis"].get("rules") or [""])[0]
        rows.append(["DDP 2 ranks on one GPU, rank 1 slowed", (r.get("job") or {}).get("pattern", "no job"), rule,
                     f"straggler rank {s.get('rank')} ({s.get('bottleneck')})" if s else "no straggler",
                     "yes" if s.get("rank") == 1 else "no (rank 1)"])
    r = rs.report("r4-imagenet-churn")
    if r is None:
        rows.append(["imagenet 8-step epochs -j 8", rs.why_not("r4-imagenet-churn"), "", "", "no"])
    else:
        pred = next((x["predicted_speedup"] for x in r["diagnosis"]["recommendations"]
                     if x["setting"] == "persistent_workers=True" and x["basis"].startswith("what-if")), None)
        tried = next((c for c in ((r.get("program") or {}).get("tries") or {}).get("changes", [])
                      if c["change"] == "persistent_workers=True"), None)
        got = tried and tried.get("speedup")
        ok = pred and got and abs(got / pred - 1) <= WITHIN
        rows.append(["imagenet 8-step epochs -j 8", rs.verdict("r4-imagenet-churn"),
                     f"persistent_workers=True: {pred:.2f}x" if pred else "no churn advice",
                     f"{got:.2f}x (watch --try)" if got else "not measured", "yes" if ok else "no"])
    return rows


def table(work):
    rs = Reports(work)
    rows = []
    t = load(os.path.join(work, "ctest-summary.json"))
    if t:
        gpu_skipped = len(t["gpu_tests_skipped"])
        rows.append(["GPU tests", f"{t['tests']} run, {len(t['failed'])} failed, {gpu_skipped} GPU tests skipped",
                     "", "", "yes" if not t["failed"] and not gpu_skipped else "no"])
    else:
        rows.append(["GPU tests", "not run", "", "", "no"])
    o = (load(os.path.join(rs.rep, "h2d.json")) or {}).get("overlap")
    for key, label, goal in (("timed", "copy behind the step, one epoch", 0.05),
                             ("short_epochs", "copy behind the step, 16-batch epochs", None)):
        row = (o or {}).get(key)
        if not row or not o.get("step_ms"):
            rows.append([label, "", "", "not measured", "no" if goal else ""])
            continue
        over = row["wall_ms"] / o["step_ms"] - 1
        text = (f"{100 * over:+.1f} % over the step; bubble {row['bubble_ms']:.2f} ms, "
                f"next() {row['next_ms']:.2f} ms, hidden {100 * row['hidden_fraction']:.0f} %")
        rows.append([label, "", "", text,
                     "" if goal is None else ("yes" if over <= goal else "no") + " (<= +5 %)"])
    bare = {n[len("trace-bare-"):]: rs.printed_rate(n) for n in rs.runs("trace-bare")}
    parts = (("noop", "watch, no-op injection / bare", None),
             ("devonly", "watch, device records only / bare", None),
             ("noruntime", "watch, + sync records / bare", None),
             ("nodriver", "watch, + selected runtime calls / bare", None),
             ("allruntime", "watch, every runtime call, no driver / bare", None),
             ("whole", "watch, CUPTI traced whole / bare", None),
             ("watched", "watch, CUPTI sampled 0.2 s in 2 / bare", 0.97))
    for kind, label, goal in parts:
        if kind != "watched" and not rs.runs(f"trace-{kind}"):
            continue
        ratios = [rs.printed_rate(n) / bare[n.rsplit("-", 1)[1]]
                  if bare.get(n.rsplit("-", 1)[1]) and rs.printed_rate(n) else None
                  for n in rs.runs(f"trace-{kind}")]
        med, text = spread(ratios)
        tracing = ((rs.report(f"trace-{kind}-1") or {}).get("gpu_trace") or {}).get("tracing")
        verdict = rs.verdict(f"trace-{kind}-1") if kind == "watched" else ""
        mode = f"tracing: {json.dumps(tracing, separators=(',', ':'))[:60]}" if tracing else ""
        rows.append([label, verdict, mode, text,
                     "" if goal is None else ("yes" if med and med >= goal else "no") + " (>= 0.97x)"])
    rows += round_four_rows(rs)
    r = rs.report("trace-watched-1")
    if r and r["diagnosis"]["bottleneck"]:
        settings = [x["setting"] for x in r["diagnosis"]["recommendations"]]
        rows.append(["in-memory MLP under watch", r["diagnosis"]["bottleneck"], ", ".join(settings)[:40] or "-",
                     "", "yes (no num_workers)" if not any(s.startswith("num_workers") for s in settings) else "no"])
    rows.append(prediction_row(rs, "mlp-gpu", "batch_size=", "mlp-gpu-batch", "MLP batch 100 -> advised"))
    rows.append(prediction_row(rs, "mlp-gpu", "device=cpu", "mlp-cpu", "MLP GPU (untraced) -> CPU",
                               base_runs="mlp-gpu-untraced"))
    traced, untraced = rs.rate("mlp-gpu"), [rs.rate(n) for n in rs.runs("mlp-gpu-untraced")]
    if traced and any(untraced):
        med, text = spread([traced / u for u in untraced if u])
        rows.append(["`run`'s own trace: traced / untraced", "", "", text, ""])
    r = rs.report("mlp-gpu-sampled")
    sampled = ((r or {}).get("gpu_trace") or {}).get("sampled")
    if r is None or not sampled:
        rows.append(["`run` sampled 0.2 s in 1 s", rs.why_not("mlp-gpu-sampled") if r is None else "not sampled",
                     "", "", "no"])
    else:
        rate, base = rs.rate("mlp-gpu-sampled"), [rs.rate(n) for n in rs.runs("mlp-gpu-untraced")]
        base = sorted(b for b in base if b)
        ratio = f"{rate / base[len(base) // 2]:.2f}x of untraced, " if rate and base else ""
        whole = rs.rate("mlp-gpu-whole")
        ratio += f"{rate / whole:.2f}x of whole; " if rate and whole else "whole not measured; "
        missed = sampled["windows_without_records"]
        rows.append(["`run` sampled 0.2 s in 1 s", rs.verdict("mlp-gpu-sampled"), f"scale {sampled['scale']:.2f}",
                     f"{ratio}{sampled['windows']} windows read, {missed} without records",
                     "yes (every window read)" if sampled["windows"] and not missed else "no"])
    rows.append(prediction_row(rs, "imagenet-j2", "num_workers=", "imagenet-advised", "imagenet r18 -j 2 -> advised"))
    for name, expect in (("imagenet-advised", None), ("imagenet-j12", None),
                         ("imagenet-dummy-r50", "gpu_compute"), ("nanogpt-compile", None)):
        r = rs.report(name)
        if not r:
            rows.append([name, rs.why_not(name), "", "", "no"])
            continue
        g = r.get("gpu_trace") or {}
        launches = g.get("launches") if isinstance(g.get("launches"), (int, float)) else None
        detail = f"{rs.rate(name):.0f} samples/s" if rs.rate(name) else "rate not measured"
        got = r["diagnosis"]["bottleneck"] or "none"
        if name == "nanogpt-compile":
            graphs = g.get("graphs") or {}
            detail = f"kernels/step {g.get('kernels_per_step', 'n/a')}, graphs {json.dumps(graphs)[:30]}"
            # Round four: the host's dispatch named, CUDA graphs advised (tree_gpu_host_dispatch).
            graphs_advised = any("reduce-overhead" in x["setting"] for x in r["diagnosis"]["recommendations"])
            ok = "yes (host-bound, CUDA graphs advised)" if graphs_advised else f"no ({got}, no graph advice)"
        else:
            ok = "" if expect is None else ("yes" if got == expect else f"no ({expect})")
        rows.append([name, got, "", detail, ok])
    rows.append(prediction_row(rs, "sync-step", "no per-step sync", "sync-end", "matmul .item() -> at the end"))
    rows.append(prediction_row(rs, "watch-matmul-item", "no per-step sync", "watch-matmul-end",
                               "same, watched"))
    rows.append(prediction_row(rs, "images-1-worker", "num_workers=", "images-advised", "images 1 worker -> advised"))
    rows.append(prediction_row(rs, "copy-pageable", "pin_memory=", "copy-pinned", "pageable copy -> pinned"))
    lines = ["| case | verdict | predicted | measured median (min-max) | goal met |",
             "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows[:28]]
    return lines


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: device_table.py WORK_DIR [OUT_FILE]")
    lines = table(sys.argv[1])
    text = "\n".join(lines) + "\n"
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
