#include "exporters/console_report.h"
#include "exporters/autotune_report.h"

#include <algorithm>
#include <cstdio>

#include "profiler/gpu_trace.h"

namespace feedscope {

namespace {
std::string line(const char* format, auto... args) {
  char buf[640];
  std::snprintf(buf, sizeof buf, format, args...);
  return std::string(buf) + "\n";
}
}  // namespace

namespace {

std::string percent_or_dash(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * *v);
  return buf;
}

// A torch.distributed job: a line per rank, and what the job's reports say of it.
std::string describe_ranks(const Report& r) {
  if (r.ranks.empty()) return "";
  std::string out = line("\n  ranks: %zu%s%s", r.ranks.size(),
                         r.job && !r.job->id.empty() ? ", job " : "",
                         r.job && !r.job->id.empty() ? r.job->id.c_str() : "");
  out += line("  %-6s %-12s %8s %-15s %6s %8s %7s %7s %7s  %s", "rank", "host", "pid", "bottleneck",
              "stall", "workers", "w busy", "main", "coll.", "ended");
  for (const RankSummary& k : r.ranks)
    out += line("  %-6s %-12s %8d %-15s %6s %8d %7s %7s %7s  %s",
                k.rank ? std::to_string(*k.rank).c_str() : "?", k.host.substr(0, 12).c_str(), k.pid,
                k.bottleneck.empty() ? "-" : k.bottleneck.c_str(),
                percent_or_dash(k.data_stall_ratio).c_str(), k.num_workers,
                percent_or_dash(k.worker_busy).c_str(), percent_or_dash(k.main_thread_busy).c_str(),
                percent_or_dash(k.collective_wait_ratio).c_str(), k.ended.empty() ? "-" : k.ended.c_str());
  out += "  (stall: waiting for data, from its spans or where its main thread waited; w busy: a loader worker's busy share; main: its main "
         "thread's; coll.: waiting in collectives for the other ranks)\n";
  if (r.job)
    for (const std::string& note : r.job->notes) out += "  job: " + note + "\n";
  return out;
}

}  // namespace

std::string format_console_report(const Report& r, bool color) {
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  const Diagnosis& d = r.diagnosis;
  std::string out;
  if (!r.interrupted.empty())
    out += line("feedscope: interrupted by %s: a partial report of the %lld steps measured",
                r.interrupted.c_str(), static_cast<long long>(r.throughput.steps));
  out += line("%sfeedscope: %s%s", bold, d.verdict.c_str(), reset);
  const char* bottleneck = d.bottleneck.empty() ? "none (not measured)" : d.bottleneck.c_str();
  if (d.data_stall_source.empty())
    out += line("  bottleneck: %s   data stall: not measured (input-bound: %s)", bottleneck,
                d.input_bound.c_str());
  else
    out += line("  bottleneck: %s   data stall: %.1f%% (input-bound: %s)", bottleneck,
                100 * d.data_stall_ratio, d.input_bound.c_str());
  if (r.throughput.steps > 0)
    out += line("  throughput: %.1f samples/s, %.2f batches/s over %lld steps in %.2f s",
                r.throughput.samples_per_s, r.throughput.batches_per_s,
                static_cast<long long>(r.throughput.steps), r.throughput.wall_s);
  else if (r.throughput.samples_per_s > 0)  // a watched program's own figure
    out += line("  throughput: %.1f samples/s (from the program's own lines) in %.2f s",
                r.throughput.samples_per_s, r.throughput.wall_s);
  else if (r.throughput.batches_per_s > 0)  // its it/s, without a batch size to scale them
    out += line("  throughput: %.2f it/s (from the program's own lines; samples/s not measured: "
                "no batch size) in %.2f s",
                r.throughput.batches_per_s, r.throughput.wall_s);
  else if (r.throughput.tokens_per_s > 0)  // a program that counts tokens, not samples
    out += line("  throughput: %.1f tokens/s (from the program's own lines; samples/s not measured) in %.2f s",
                r.throughput.tokens_per_s, r.throughput.wall_s);
  else if (r.throughput.lines_per_s > 0)  // a line repeating steadily, its only measure
    out += line("  throughput: %.3g lines/s (a line the program repeats; samples/s not measured) in %.2f s",
                r.throughput.lines_per_s, r.throughput.wall_s);
  else
    out += line("  throughput: not measured in %.2f s (no stage spans%s)", r.throughput.wall_s,
                r.program ? " and no progress line in a known format: wrap the loop with feedscope, "
                            "or give --throughput-pattern"
                          : "");
  if (r.throughput.steps == 0 && !r.throughput.source.empty())
    out += line("    read from %s", r.throughput.source.c_str());
  out += line("  device: %s   model: %s", r.environment.device.c_str(), r.training.model.c_str());
  if (r.training.first_loss && r.training.last_loss)
    out += line("  loss: %.4f -> %.4f", *r.training.first_loss, *r.training.last_loss);
  out += "\n";
  const bool any_stage = std::any_of(r.stages.begin(), r.stages.end(),
                                     [](const StageStats& s) { return s.count > 0; });
  if (!any_stage && (r.program || !r.ranks.empty()))
    out += "  stages: not measured (the program sent no stage spans)\n";
  else
    out += line("  %-10s %8s %10s %10s %10s %8s", "stage", "count", "mean ms", "p95 ms", "busy s",
                "share");
  for (const StageStats& s : r.stages) {
    if (s.count == 0) continue;
    out += line("  %-10s %8lld %10.3f %10.3f %10.3f %7.1f%%", s.name.c_str(),
                static_cast<long long>(s.count), s.mean_ms, s.p95_ms, s.busy_s, 100 * s.share);
  }
  if (r.h2d_submit && r.h2d_submit->count > 0 && r.throughput.wall_s > 0)
    out += line("  %-10s %8lld %10.3f %10s %10.3f %7.1f%%   (the training thread, outside wait)",
                "h2d submit", static_cast<long long>(r.h2d_submit->count),
                1e3 * r.h2d_submit->busy_s / static_cast<double>(r.h2d_submit->count), "",
                r.h2d_submit->busy_s, 100 * r.h2d_submit->busy_s / r.throughput.wall_s);
  if (const std::string cap = describe_trace_cap(r.trace); !cap.empty())
    out += "  trace.json: " + cap + "\n";
  if (r.gpu_trace && r.gpu_trace->tracing)
    out += "  CUDA trace: " + describe_tracing(*r.gpu_trace->tracing) + "\n";
  out += describe_data_errors(r.data_errors);
  if (r.samples) out += describe_samples(*r.samples);
  out += describe_ranks(r);
  if (r.autotune) out += describe_autotune(*r.autotune);
  out += "\n  evidence:\n";
  for (const std::string& e : d.evidence) out += "    - " + e + "\n";
  if (!d.recommendations.empty()) {
    out += "  recommendations:\n";
    // Measured gains first, then predictions, then what nothing measured (report.json's basis_kind).
    std::vector<const Recommendation*> shown;
    for (const char* kind : {"measured", "predicted", "not measured"})
      for (const Recommendation& rec : d.recommendations)
        if (basis_kind(rec) == std::string(kind)) shown.push_back(&rec);
    for (const Recommendation* rec : shown) {
      out += line("    - %s", rec->action.c_str());
      // Some advice comes without a prediction (a loader-only run has no step to predict from).
      const std::string setting = rec->setting.empty() ? "" : "setting " + rec->setting + " ";
      if (rec->predicted_samples_per_s && rec->predicted_speedup)
        out += line("      %s-> predicted %.0f samples/s (%.2fx)", setting.c_str(),
                    *rec->predicted_samples_per_s, *rec->predicted_speedup);
      else if (rec->predicted_speedup)  // from CPU shares, or measured by `watch --try`
        out += line("      %s-> %s %.2fx", setting.c_str(), basis_kind(*rec), *rec->predicted_speedup);
      else
        out += line("      %s(%s)", setting.c_str(),
                    rec->basis.starts_with("no prediction") || rec->basis.starts_with("not measured")
                        ? rec->basis.c_str()
                        : "no prediction");
    }
  }
  return out;
}

std::string describe_data_errors(const DataErrorsSummary& e, std::size_t shown) {
  if (e.count == 0) return "";
  const bool skip = e.policy == "skip";
  std::string out = line("\n  bad samples: %llu of %llu %s (%.2f%%)", static_cast<unsigned long long>(e.count),
                         static_cast<unsigned long long>(e.attempted), skip ? "skipped" : "failed to load",
                         100 * e.ratio);
  if (skip && e.ratio_floor > 0)
    out += line("    the run stops once more than %g%% have failed (--max-bad-ratio), counted over at least %llu "
                "samples: up to %.0f may fail among the first %llu", 100 * e.max_bad_ratio,
                static_cast<unsigned long long>(e.ratio_floor), e.max_bad_ratio * static_cast<double>(e.ratio_floor),
                static_cast<unsigned long long>(e.ratio_floor));
  else if (skip)
    out += line("    the run stops once more than %g%% have failed (--max-bad-ratio)", 100 * e.max_bad_ratio);
  for (std::size_t i = 0; i < e.examples.size() && i < shown; ++i)
  {
    const DataErrorExample& x = e.examples[i];
    // A SampleError's message names its file already; say it once.
    out += "    - " + (x.message.find(x.file) != std::string::npos ? x.message : x.file + ": " + x.message) + "\n";
  }
  if (e.count > std::min<std::uint64_t>(shown, e.examples.size()))
    out += line("    (%llu more; report.json lists the first %zu under data_errors)",
                static_cast<unsigned long long>(e.count - std::min<std::uint64_t>(shown, e.examples.size())),
                e.examples.size());
  return out;
}

std::string describe_samples(const SampleCosts& c, std::size_t shown) {
  if (c.count == 0) return "";
  std::string out = line("\n  samples: %llu loaded (%s): p50 %.2f ms, p90 %.2f, p99 %.2f, max %.1f; the "
                         "slowest 1%% took %.0f%% of load time, the slowest 5%% %.0f%%",
                         static_cast<unsigned long long>(c.count), c.measured_by.c_str(), c.p50_ms,
                         c.p90_ms, c.p99_ms, c.max_ms, 100 * c.slowest_1pct_share,
                         100 * c.slowest_5pct_share);
  if (c.wait_s && c.wait_on_slowest_s && *c.wait_s > 0)
    out += line("    the loop waited %.2f s in the loader, %.0f%% of it on a batch's slowest sample",
                *c.wait_s, 100 * *c.wait_on_slowest_s / *c.wait_s);
  for (std::size_t i = 0; i < c.slowest.size() && i < shown; ++i) {
    const SlowSample& s = c.slowest[i];
    std::string what;
    if (s.width && s.height) what = line("%dx%d", *s.width, *s.height);
    if (!what.empty()) what.pop_back();  // line() ends with a newline
    if (s.bytes) what += (what.empty() ? "" : ", ") + line("%.1f MB", static_cast<double>(*s.bytes) / 1e6);
    if (!what.empty() && what.back() == '\n') what.pop_back();
    if (!s.format.empty()) what += (what.empty() ? "" : " ") + s.format;
    out += line("    - %.1f ms %s%s", s.ms, s.file.c_str(), what.empty() ? "" : (" (" + what + ")").c_str());
  }
  return out;
}

std::string describe_trace_cap(const TraceSummary& t) {
  if (!t.omitted_from_s) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%llu of %llu stage spans: those that began from %.2f s to %.2f s are left out "
                "(trace_max_spans %llu)",
                static_cast<unsigned long long>(t.spans_kept),
                static_cast<unsigned long long>(t.spans_total), *t.omitted_from_s, *t.omitted_to_s,
                static_cast<unsigned long long>(t.max_spans));
  return buf;
}

}  // namespace feedscope
