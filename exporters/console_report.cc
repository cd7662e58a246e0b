#include "exporters/console_report.h"

#include <cstdio>

namespace feedscope {

namespace {
std::string line(const char* format, auto... args) {
  char buf[640];
  std::snprintf(buf, sizeof buf, format, args...);
  return std::string(buf) + "\n";
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
  out += line("  bottleneck: %s   data stall: %.1f%% (input-bound: %s)", d.bottleneck.c_str(),
              100 * d.data_stall_ratio, d.input_bound.c_str());
  out += line("  throughput: %.1f samples/s, %.2f batches/s over %lld steps in %.2f s",
              r.throughput.samples_per_s, r.throughput.batches_per_s,
              static_cast<long long>(r.throughput.steps), r.throughput.wall_s);
  out += line("  device: %s   model: %s", r.environment.device.c_str(), r.training.model.c_str());
  if (r.training.first_loss && r.training.last_loss)
    out += line("  loss: %.4f -> %.4f", *r.training.first_loss, *r.training.last_loss);
  out += "\n";
  out += line("  %-10s %8s %10s %10s %10s %8s", "stage", "count", "mean ms", "p95 ms", "busy s",
              "share");
  for (const StageStats& s : r.stages) {
    if (s.count == 0) continue;
    out += line("  %-10s %8lld %10.3f %10.3f %10.3f %7.1f%%", s.name.c_str(),
                static_cast<long long>(s.count), s.mean_ms, s.p95_ms, s.busy_s, 100 * s.share);
  }
  if (const std::string cap = describe_trace_cap(r.trace); !cap.empty())
    out += "  trace.json: " + cap + "\n";
  out += "\n  evidence:\n";
  for (const std::string& e : d.evidence) out += "    - " + e + "\n";
  if (!d.recommendations.empty()) {
    out += "  recommendations:\n";
    for (const Recommendation& rec : d.recommendations) {
      out += line("    - %s", rec.action.c_str());
      out += line("      setting %s -> predicted %.0f samples/s (%.2fx)", rec.setting.c_str(),
                  rec.predicted_samples_per_s, rec.predicted_speedup);
    }
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
