#!/usr/bin/env python3
"""Scores feedscope's advice on training programs it did not write: for each case, `feedscope watch`
runs the program as a user would, and the change feedscope recommends is then run for real, side
by side with the program as it was, so the verdict and the predicted speed-up are checked against
what the change measures. Where feedscope recommends no change, the case's alternatives are run,
so a change that would have helped and was not advised shows as missed.

    python3 bench/corpus.py --cases tests/corpus/cases.json [--only NAME] [--json OUT]

A case (tests/corpus/cases.json; bench/corpus_public.json for public programs fetched by hand):
  name, shape        what it is
  command            argv with {knob} placeholders and {python}, {corpus} (the cases file's
                     folder), {data} (an image folder this script makes; {imagenet} has it as
                     train/ and val/), {public} (--public DIR: pytorch/examples), {NAME} (each
                     --program NAME=DIR: another public program's clone), {tmp} (a scratch folder)
  knobs              the program as the user runs it: {"workers": 1, "threads": 1}
  throughput         how the program says its speed: "pattern" (a regex whose first group is a
                     number), "unit" ("s/batch", "ms/batch", "it/s", "samples/s", or "count/s": its
                     groups 1 and 2 are samples and the seconds they took), "per_batch"
                     (samples per batch for s/batch and it/s), "skip" (first matches left out:
                     warm-up); or "wall": true to time the whole run (a fixed amount of work)
  expect             "bottleneck": the names that are right (what running the alternatives shows);
                     and how feedscope must have read the program, where that is the point of the
                     case: "throughput_source", "data_stall_source" (text the report's source
                     must contain), "trainers" (processes the tree names trainer)
  alternatives       knob settings to measure where feedscope advises none: [{"workers": 2}]
  env                extra environment, with placeholders: {"OMP_NUM_THREADS": "{threads}"}
  same_program_as    a case earlier in the file that runs the same program on the same data
                     (printing other progress lines): a change it measured is not run again
  try                watch it with --try: {"mode": "auto" (--try=auto) or "all" (--try),
                     "seconds": --try-seconds, "rounds": --try-rounds}; a recommendation that one
                     of its trials contradicts (a loss, or inside the noise) makes the case wrong,
                     and "expect": {"tried": [...]} names the changes it must have run (each the
                     start of the change as --try names it: "OMP_NUM_THREADS", "-j")
  cwd                where it runs (a program that reads ../data)
  duration_s         stop it with SIGINT after this long (an epoch too long to finish)

A recommendation's setting maps to a knob: num_workers=N (or --try's -j N, --workers N) ->
workers, torch.set_num_threads(N) (or --try's OMP_NUM_THREADS=N) -> threads, batch_size=N (-b N)
-> batch, persistent_workers=True -> persistent (1). The speed-up of a change is measured against the runs before and after it (this machine
drifts by 20 % over a minute): two pairs, a third where they disagree by more than 10 %, the
median.

Exit status 0 when every case's verdict is right, every advised change helps (>= 1.05x) and every
prediction lands within 25 % of what its change measured (or none is made); 1 otherwise; 77 when
the machine is too busy to measure (another process on the cores). A missed change is reported,
not failed, so the test suite passes --skip-alternatives and runs none."""

import argparse
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = [
    (re.compile(r"^num_workers=(\d+)$"), "workers"),
    (re.compile(r"^torch\.set_num_threads\((\d+)\)$"), "threads"),
    (re.compile(r"^batch_size=(\d+)$"), "batch"),
    # What `watch --try` measured, named as it ran it.
    (re.compile(r"^OMP_NUM_THREADS=(\d+)$"), "threads"),
    (re.compile(r"^(?:-j|--workers|--num-workers|--num_workers)[ =](\d+)$"), "workers"),
    (re.compile(r"^(?:-b|--batch-size|--batch_size)[ =](\d+)$"), "batch"),
    (re.compile(r"^persistent_workers=(1|True)$"), "persistent"),
]
HELPS = 1.05        # a change that gains less is no change worth advising
# How a suggestion without a setting names a knob: advice to try and measure, not a claim.
NAMED_IN_ACTION = {"workers": ("num_workers",), "threads": ("OMP_NUM_THREADS", "set_num_threads"),
                   "batch": ("batch size", "batch_size")}
WITHIN = 0.25       # a prediction lands within this of the measured speed-up
AGREE = 0.10        # two measurements of a change this close need no third


def machine_busy(seconds=1.0):
    """Share of the machine's CPU time others used over `seconds` (this script sleeps)."""
    def read():
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(f), f[3] + f[4]
    t0, i0 = read()
    time.sleep(seconds)
    t1, i1 = read()
    return 1 - (i1 - i0) / max(t1 - t0, 1)


def expand(arg, knobs, places):
    for key, value in {**places, **knobs}.items():
        arg = arg.replace("{" + key + "}", str(value))
    return arg


class Case:
    def __init__(self, spec, places, feedscope, workdir):
        self.spec = spec
        self.places = places
        self.feedscope = feedscope
        self.workdir = workdir

    def argv(self, knobs):
        return [expand(a, knobs, self.places) for a in self.spec["command"]]

    def try_args(self):
        """watch's --try options where the case asks for them."""
        t = self.spec.get("try")
        if not t:
            return []
        return ["--try=auto" if t.get("mode", "auto") == "auto" else "--try",
                "--try-seconds", str(t.get("seconds", 20)), "--try-rounds", str(t.get("rounds", 2))]

    def env(self, knobs):
        return {**os.environ, **{k: expand(v, knobs, self.places) for k, v in self.spec.get("env", {}).items()}}

    def rate(self, output, wall_s):
        """samples/s (or runs/s for a wall-timed case) from what the program printed."""
        t = self.spec["throughput"]
        if t.get("wall"):
            return 1.0 / wall_s
        matches = list(re.finditer(t["pattern"], output))[t.get("skip", 0):]
        values = [float(m.group(1)) / (float(m.group(2)) if t["unit"] == "count/s" else 1.0) for m in matches]
        if not values:
            raise RuntimeError(f"{self.spec['name']}: no line matched {t['pattern']!r}")
        unit = t["unit"]
        if unit in ("samples/s", "count/s"):
            return statistics.mean(values)
        if unit == "it/s":
            return statistics.mean(values) * t["per_batch"]
        seconds = statistics.mean(values) / (1000.0 if unit == "ms/batch" else 1.0)
        return t["per_batch"] / seconds

    def run(self, knobs, watch_dir=None):
        """One run of the program; under `feedscope watch` where `watch_dir` is given. A case with
        `duration_s` (an epoch too long to finish) is stopped with SIGINT after that long, as
        watch's --duration does."""
        argv = self.argv(knobs)
        duration = self.spec.get("duration_s")
        if watch_dir:
            # --no-try-loader: what feedscope's loader would do on the files is an offer the corpus
            # does not score; measuring it after the program ends takes seconds a case.
            argv = [self.feedscope, "watch", "--report-dir", str(watch_dir), "--no-try-loader",
                    *(["--duration", str(duration)] if duration else []), *self.try_args(), "--"] + argv
        begin = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=self.env(knobs), cwd=self.places.get("cwd"))
        try:
            output, _ = p.communicate(timeout=duration + 30 if duration and watch_dir
                                      else duration or self.spec.get("timeout", 600))
        except subprocess.TimeoutExpired:
            p.send_signal(2)
            output, _ = p.communicate()
            if not duration:
                raise RuntimeError(f"{self.spec['name']}: {' '.join(argv)} ran out of time")
        wall = time.monotonic() - begin
        if p.returncode != 0 and not duration:
            raise RuntimeError(f"{self.spec['name']}: {' '.join(argv)} exited {p.returncode}:\n"
                               f"{output[-3000:]}")
        return self.rate(output, wall)

    def speedup(self, change, first_base):
        """The change against the runs either side of it: twice, and a third time where the two
        disagree by more than AGREE (a slow minute); the median."""
        base = self.spec["knobs"]
        before = first_base if first_base is not None else self.run(base)
        ratios = []
        while len(ratios) < 2 or (len(ratios) == 2 and max(ratios) / min(ratios) > 1 + AGREE):
            changed = self.run({**base, **change})
            after = self.run(base)
            ratios.append(changed / math.sqrt(before * after))
            before = after
        return statistics.median(ratios)


def read_as(report, expect):
    """Each of the case's `expect` facts beyond the bottleneck, and whether the report has it:
    "throughput_source" and "data_stall_source" (text its source must contain), "trainers" (the
    tree's count of training processes)."""
    found = {}
    if "throughput_source" in expect:
        found["throughput_source"] = expect["throughput_source"] in (report["throughput"].get("source") or "")
    if "data_stall_source" in expect:
        found["data_stall_source"] = expect["data_stall_source"] in (report["diagnosis"].get("data_stall_source") or "")
    if "trainers" in expect:
        found["trainers"] = ((report.get("program") or {}).get("tree") or {}).get("trainers") == expect["trainers"]
    return found


def knob_of_setting(setting):
    """("workers", 2) for "num_workers=2"; a switch is 1 ("persistent_workers=True")."""
    for pattern, knob in SETTINGS:
        m = pattern.match(setting or "")
        if m:
            return knob, 1 if m.group(1) == "True" else int(m.group(1))
    return None


def knobs_named(rec):
    """The knobs a recommendation advises: its setting's, else the ones its words name."""
    k = knob_of_setting(rec.get("setting"))
    if k:
        return {k[0]}
    return {knob for knob, words in NAMED_IN_ACTION.items() if any(w in rec.get("action", "") for w in words)}


def tried_changes(report):
    """What `watch --try` ran: [{change, knob, speedup, outcome}]."""
    tries = ((report.get("program") or {}).get("tries") or {})
    out = []
    for c in tries.get("changes") or []:
        k = knob_of_setting(c["change"])
        out.append({"change": c["change"], "knob": k[0] if k else None, "speedup": c.get("speedup"),
                    "outcome": c.get("outcome")})
    return out, tries.get("skipped")


def contradicted(diagnosis, tried):
    """The recommendations that a trial of the same change measured as a loss or inside the noise."""
    refuted = {t["knob"] for t in tried if t["outcome"] in ("loss", "within the noise") and t["knob"]}
    return [r.get("action", "") for r in diagnosis.get("recommendations", []) if knobs_named(r) & refuted]


def advised_change(diagnosis):
    """The first recommendation whose setting maps to a knob: (knob change, prediction, text)."""
    for rec in diagnosis.get("recommendations", []):
        k = knob_of_setting(rec.get("setting"))
        if k:
            return {k[0]: k[1]}, rec.get("predicted_speedup"), rec
    return None, None, None


MEASURED = {}  # (case name, change) -> the speed-up measured, for cases that share a program
SKIP_ALTERNATIVES = False  # --skip-alternatives


def measured_before(case, change_key):
    """The speed-up of a change (its key in MEASURED) as the case named by `same_program_as`
    measured it this run: a case that is the same program and data printing other lines
    (MetricLogger's, tqdm's) checks how feedscope read it, and its change's truth is that
    program's. None where that case did not run (--only) or measured another change."""
    other = case.spec.get("same_program_as")
    return MEASURED.get((other, change_key)) if other else None


def score(case):
    spec = case.spec
    out = {"name": spec["name"], "shape": spec.get("shape", ""), "command": " ".join(case.argv(spec["knobs"]))}
    report_dir = case.workdir / spec["name"]
    base_rate = case.run(spec["knobs"], watch_dir=report_dir)
    report = json.loads((report_dir / "report.json").read_text())
    d = report["diagnosis"]
    out["bottleneck"] = d["bottleneck"]
    out["verdict"] = d["verdict"]
    out["recommendations"] = [{k: r.get(k) for k in ("setting", "action", "predicted_speedup")}
                              for r in d.get("recommendations", [])]
    out["verdict_right"] = d["bottleneck"] in spec["expect"]["bottleneck"]
    # Where the case says how feedscope must have read the program (its own progress lines, a
    # role in the tree), a verdict reached another way is not right.
    out["read_as"] = read_as(report, spec["expect"])
    out["verdict_right"] = out["verdict_right"] and all(out["read_as"].values())
    out["tried"], out["try_skipped"] = tried_changes(report)
    out["contradicted"] = contradicted(d, out["tried"])
    expected_tries = spec["expect"].get("tried", [])
    # "OMP_NUM_THREADS" names the change whatever its value (the cores of the machine it runs on).
    out["not_tried"] = [c for c in expected_tries if not any(t["change"].startswith(c) for t in out["tried"])]
    out["throughput_source"] = report["throughput"].get("source")
    change, predicted, rec = advised_change(d)
    if change and not set(change) <= set(spec["knobs"]):
        # Advice this case cannot try (num_workers for a program without a DataLoader flag): it
        # is not run as if the unchanged command were the change.
        out.update(advice=rec["setting"], predicted=predicted, untestable=True, helps=False,
                   prediction_ok=predicted is None)
        change = None
        out["ok"] = False
        return out
    if change:
        key = json.dumps(change, sort_keys=True)
        reused = measured_before(case, key)
        measured = reused if reused is not None else case.speedup(change, base_rate)
        MEASURED[(spec["name"], key)] = measured
        if reused is not None:
            out["measured_by"] = spec["same_program_as"]
        out.update(advice=rec["setting"], predicted=predicted, measured=round(measured, 3),
                   helps=measured >= HELPS,
                   prediction_ok=predicted is None or abs(predicted / measured - 1) <= WITHIN)
    else:
        out["advice"] = None
        out["helps"] = out["prediction_ok"] = True  # no advice is never wrong advice
        truths = {}
        for alt in ([] if SKIP_ALTERNATIVES else spec.get("alternatives", [])):
            key = json.dumps(alt, sort_keys=True)
            measured = measured_before(case, key)
            MEASURED[(spec["name"], key)] = measured if measured is not None else case.speedup(alt, base_rate)
            truths[json.dumps(alt)] = round(MEASURED[(spec["name"], key)], 3)
        out["alternatives"] = truths
        actions = " ".join(r.get("action", "") for r in d.get("recommendations", []))
        helped = [a for a, s in truths.items() if s >= 1.10]
        out["suggested"] = [a for a in helped
                            if any(w in actions for k in json.loads(a) for w in NAMED_IN_ACTION.get(k, ()))]
        out["missed"] = [a for a in helped if a not in out["suggested"]]
    out["ok"] = (out["verdict_right"] and out["helps"] and out["prediction_ok"] and not out["contradicted"]
                 and not out["not_tried"])
    return out


def table(results):
    lines = [f"{'case':<22} {'bottleneck':<16} {'verdict':<7} {'advice':<26} {'pred':>6} {'meas':>6}  result"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['name']:<22} ERROR: {r['error'].splitlines()[0][:80]}")
            continue
        pred = f"{r['predicted']:.2f}" if r.get("predicted") else "none"
        meas = f"{r['measured']:.2f}" if "measured" in r else ", ".join(
            f"{k}: {v:.2f}" for k, v in r.get("alternatives", {}).items()) or "-"
        result = "ok" if r["ok"] else "WRONG"
        misread = [k for k, v in r.get("read_as", {}).items() if not v]
        if misread:
            result += " (not read as expected: " + ", ".join(misread) + ")"
        if r.get("suggested"):
            result += " (suggested to try: " + ", ".join(r["suggested"]) + ")"
        if r.get("measured_by"):
            result += f" (measured as {r['measured_by']})"
        if r.get("missed"):
            result += " (missed " + ", ".join(r["missed"]) + ")"
        for t in r.get("tried", []):
            result += f" (tried {t['change']}: " + (f"{t['speedup']:.2f}x, " if t.get("speedup") else "") + \
                f"{t['outcome']})"
        if r.get("try_skipped"):
            result += f" (--try ran nothing: {r['try_skipped'][:60]})"
        if r.get("contradicted"):
            result += " (CONTRADICTED by its trial: " + "; ".join(a[:50] for a in r["contradicted"]) + ")"
        if r.get("not_tried"):
            result += " (NOT TRIED: " + ", ".join(r["not_tried"]) + ")"
        lines.append(f"{r['name']:<22} {r['bottleneck']:<16} {'right' if r['verdict_right'] else 'WRONG':<7} "
                     f"{r['advice'] or '-':<26} {pred:>6} {meas:>6}  {result}")
    verdicts = sum(r["verdict_right"] for r in results)
    predictions = [r for r in results if r.get("predicted")]
    within = sum(r["prediction_ok"] for r in predictions)
    lines.append(f"verdicts right: {verdicts}/{len(results)}; advised changes that helped: "
                 f"{sum(r.get('helps', False) for r in results if r['advice'])}/"
                 f"{sum(1 for r in results if r['advice'])}; predictions within 25 %: "
                 f"{within}/{len(predictions)}; recommendations a trial contradicted: "
                 f"{sum(len(r.get('contradicted', [])) for r in results)}")
    return "\n".join(lines)


def make_images(feedscope, out, spec):
    subprocess.run([feedscope, "make-dataset", "images", "--out", str(out), "--count",
                    str(spec.get("count", 256)), "--size", spec.get("size", "1000x750"),
                    "--classes", "4"], check=True, capture_output=True)


def program_arg(text):
    name, sep, folder = text.partition("=")
    if not sep or not name.isidentifier() or not os.path.isdir(folder):
        sys.exit(f"corpus: --program {text!r}: expected NAME=DIR with DIR an existing folder")
    return name, os.path.abspath(folder)


def unplaced(spec, places):
    """The {placeholders} of a case's command, environment and cwd that nothing fills."""
    texts = spec["command"] + list(spec.get("env", {}).values()) + [spec.get("cwd", "")]
    names = {m for t in texts for m in re.findall(r"\{(\w+)\}", t)}
    return sorted("{" + n + "}" for n in names
                  if n not in spec.get("knobs", {}) and not places.get(n) and n != "cwd")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=str(ROOT / "tests" / "corpus" / "cases.json"))
    ap.add_argument("--only", action="append", help="a case's name (repeatable)")
    ap.add_argument("--feedscope", default=os.environ.get("FEEDSCOPE_BINARY", str(ROOT / "build" / "cli" / "feedscope")))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--public", default="", help="pytorch/examples' clone ({public})")
    ap.add_argument("--program", action="append", default=[], metavar="NAME=DIR",
                    help="another public program's clone, {NAME} in the cases (repeatable)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--skip-alternatives", action="store_true",
                    help="where feedscope advises no change, do not run the case's alternatives: they "
                         "show what was missed, which passes or fails nothing (the test suite's run)")
    ap.add_argument("--retries", type=int, default=1,
                    help="times a case whose change missed is measured again")
    ap.add_argument("--max-busy", type=float, default=0.25,
                    help="skip (exit 77) when other processes use more of the CPUs than this")
    args = ap.parse_args()
    global SKIP_ALTERNATIVES
    SKIP_ALTERNATIVES = args.skip_alternatives
    cases_path = pathlib.Path(args.cases).resolve()
    if os.sep in args.feedscope:  # the programs run in another folder
        args.feedscope = os.path.abspath(args.feedscope)
    doc = json.loads(cases_path.read_text())
    specs = [c for c in doc["cases"] if not args.only or c["name"] in args.only]
    if not specs:
        sys.exit(f"corpus: no case named {args.only} in {cases_path}")
    busy = machine_busy()
    if busy > args.max_busy:
        print(f"corpus: other processes use {100 * busy:.0f} % of the CPUs: the changes cannot "
              "show what they would; not measured", file=sys.stderr)
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="feedscope-corpus-") as tmp:
        tmp = pathlib.Path(tmp)
        programs = dict(program_arg(p) for p in args.program)
        places = {**programs, "python": args.python, "corpus": str(cases_path.parent), "public": args.public,
                  "data": str(tmp / "images"), "imagenet": str(tmp / "imagenet"), "tmp": str(tmp)}
        make_images(args.feedscope, tmp / "images", doc.get("images", {}))
        # pytorch/examples' imagenet/main.py reads DIR/train and DIR/val.
        (tmp / "imagenet").mkdir()
        for split in ("train", "val"):
            (tmp / "imagenet" / split).symlink_to(tmp / "images")
        results = []
        for spec in specs:
            # A program that writes beside itself (imagenet's checkpoint.pth.tar) writes into the
            # temporary folder, not into the checkout the corpus is run from.
            cwd = expand(spec["cwd"], {}, places) if "cwd" in spec else str(tmp)
            case = Case(spec, {**places, "cwd": cwd}, args.feedscope, tmp)
            missing = unplaced(spec, places)
            if missing:
                print(f"corpus: {spec['name']}: not run: its command names {', '.join(missing)}: pass "
                      f"--program NAME=DIR (or --public) with the program's clone", file=sys.stderr, flush=True)
                continue
            try:
                r = score(case)
            except (RuntimeError, OSError, KeyError, ValueError, subprocess.SubprocessError) as e:
                r = {"name": spec["name"], "error": str(e), "ok": False, "verdict_right": False,
                     "bottleneck": "-", "advice": None}
                print(f"corpus: {e}", file=sys.stderr, flush=True)
                results.append(r)
                continue
            print(json.dumps(r), file=sys.stderr, flush=True)
            # A slow minute misses once; a wrong model misses again.
            for _ in range(args.retries):
                if r["ok"] or not r["verdict_right"]:
                    break
                r = score(case)
                r["retried"] = True
                print(json.dumps(r), file=sys.stderr, flush=True)
            results.append(r)
    print(table(results))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
