#!/usr/bin/env bash
# /metrics under 200 concurrent scrapers (wrk) while `feedscope run` trains: the training
# throughput with scrapers over the throughput without, and what the scrapers got.
#   ./bench/scrape_load.sh [REPEATS] [WINDOW_S]      (defaults 5 and 10; needs wrk: apt-get install wrk)
# Each repetition runs four trainings in a rotated order: no scraper, wrk back to back (each of
# the 200 connections asks again as soon as it has its answer), and wrk paced like real scrapers
# (each connection once per 100 ms, once per second). Throughput is measured over the same window
# in all four, from feedscope_samples_total read before and after it: the run has a long
# --duration, is stopped after the window, and no teardown falls inside a measurement. Ratios are
# per repetition (scraped / the unscraped run of the same repetition), reported as their median:
# on a shared machine, drift moves neighbours alike. wrk is one process with one thread on the same
# 2 cores, so its own CPU counts against training too: the paced runs are the realistic ones.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
fs="$build/cli/feedscope"
repeats="${1:-5}"
window="${2:-10}"
command -v wrk >/dev/null || { echo "scrape_load: wrk not found (Debian: apt-get install wrk)" >&2; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/feedscope-scrape-load-XXXXXX")"
run_pid=""
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null && wait "$run_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# One GET over bash's /dev/tcp: no curl needed. Prints the body.
scrape() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}
samples_total() { scrape "$1" | awk '/^feedscope_samples_total/ {print $NF; exit}'; }
# CPU seconds (user + system) of a process, or of one of its threads; nan without one (a build
# whose HTTP thread has no name).
cpu_s() { if [ -n "$1" ]; then awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "$1/stat"; else echo nan; fi; }

# measure MODE REPEAT: prints "MODE samples_per_s" and, for wrk modes, wrk's key/value lines.
measure() {
  local mode="$1" rep="$2"
  "$fs" run --dataset synthetic:3x32x32 --model mlp --hidden 256 --batch-size 64 --num-workers 1 \
    --warmup 20 --duration 600 --sample-hz 10 --metrics-addr 127.0.0.1:0 \
    --report-dir "$work/report-$mode-$rep" >"$work/run.log" 2>&1 &
  run_pid=$!
  local port=""
  for _ in $(seq 600); do
    port=$(sed -n 's|.*metrics on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$work/run.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "scrape_load: feedscope did not start:" >&2; cat "$work/run.log" >&2; exit 1; }
  # Past warm-up (20 steps) and 100 more before the window opens.
  until [ "$(samples_total "$port" | cut -d. -f1)" -ge $((120 * 64)) ] 2>/dev/null; do sleep 0.1; done
  local http="" t
  for t in /proc/"$run_pid"/task/*; do [ "$(cat "$t/comm")" = feedscope-http ] && http="$t"; done
  local t0 s0 c0 h0 t1 s1 c1 h1
  t0=$(date +%s.%N); s0=$(samples_total "$port"); c0=$(cpu_s "/proc/$run_pid"); h0=$(cpu_s "$http")
  case "$mode" in
    none) sleep "$window" ;;
    wrk_*) local interval="${mode#wrk_}" out="$work/wrk-$mode-$rep.txt"
           # The subshell's `times` gives its children's CPU: wrk's, with no /usr/bin/time needed.
           (
             wrk -c 200 -t 1 -d "${window}s" --timeout 10s -s "$root/bench/scrape_load.lua" \
               "http://127.0.0.1:$port/metrics" -- "$interval" >"$out" 2>&1
             times >"$out.times"  # not in a pipeline: that would be another subshell's times
             sed -n '2s/^\([0-9]*\)m\([0-9.]*\)s \([0-9]*\)m\([0-9.]*\)s$/\1 \2 \3 \4/p' "$out.times" |
               awk '{print "wrk_user_s", $1 * 60 + $2; print "wrk_sys_s", $3 * 60 + $4}' >>"$out"
           ) ;;
  esac
  t1=$(date +%s.%N); s1=$(samples_total "$port"); c1=$(cpu_s "/proc/$run_pid"); h1=$(cpu_s "$http")
  kill -TERM "$run_pid"; wait "$run_pid" 2>/dev/null || true; run_pid=""
  # mode, repetition, samples/s, then the share of one core taken by feedscope and its HTTP thread
  /usr/bin/python3 -c "d = $t1 - $t0; print('$mode', $rep, ($s1 - $s0) / d, ($c1 - $c0) / d, (float('$h1') - float('$h0')) / d)"
}

modes=(none wrk_0 wrk_100 wrk_1000)
: >"$work/rates.txt"
for rep in $(seq "$repeats"); do
  for i in 0 1 2 3; do
    mode="${modes[$(( (i + rep) % 4 ))]}"
    measure "$mode" "$rep" | tee -a "$work/rates.txt" >&2
  done
done

WORK="$work" WINDOW="$window" /usr/bin/python3 - <<'PY'
import os, statistics, glob
work = os.environ["WORK"]
rates = {}
cpu = {}
for line in open(f"{work}/rates.txt"):
    mode, rep, rate, process, http = line.split()
    rates.setdefault(mode, {})[int(rep)] = float(rate)
    cpu.setdefault(mode, []).append((float(process), float(http)))
base = rates["none"]
core = lambda mode, i: statistics.median(c[i] for c in cpu[mode])
print(f"feedscope run (synthetic:3x32x32, mlp 256, batch 64, 1 worker) under 200 scrapers, "
      f"{len(base)} repetitions of a {os.environ['WINDOW']} s window")
print(f"  unscraped: median {statistics.median(base.values()):.0f} samples/s "
      f"(min {min(base.values()):.0f}, max {max(base.values()):.0f}); feedscope "
      f"{core('none', 0):.2f} cores, its HTTP thread {core('none', 1):.3f}")
names = {"wrk_0": "wrk back to back", "wrk_100": "wrk, 1 scrape/100 ms per connection",
         "wrk_1000": "wrk, 1 scrape/s per connection"}
for mode in ("wrk_0", "wrk_100", "wrk_1000"):
    ratios = [rates[mode][r] / base[r] for r in rates[mode]]
    stats = {}
    for f in glob.glob(f"{work}/wrk-{mode}-*.txt"):
        kv = dict(l.split() for l in open(f) if len(l.split()) == 2 and l.split()[0].isidentifier())
        for k, v in kv.items():
            stats.setdefault(k, []).append(float(v))
    med = lambda k: statistics.median(stats[k]) if k in stats else float("nan")
    total = lambda k: int(sum(stats.get(k, [])))
    print(f"  {names[mode]}: throughput ratio median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"{med('requests') / med('duration_s'):.0f} scrapes/s, {total('requests')} served, "
          f"latency p50 {med('p50_ms'):.1f} ms, p99 {med('p99_ms'):.1f} ms; errors: "
          f"connect {total('errors_connect')}, read {total('errors_read')}, "
          f"write {total('errors_write')}, timeout {total('errors_timeout')}, non-2xx {total('non2xx')}")
    scrapes_per_s = med('requests') / med('duration_s')
    print(f"    CPU: feedscope {core(mode, 0):.2f} cores, its HTTP thread {core(mode, 1):.3f} "
          f"({1e3 * core(mode, 1) / scrapes_per_s:.3f} ms per scrape), wrk "
          f"{(med('wrk_user_s') + med('wrk_sys_s')) / med('duration_s'):.3f}")
PY
