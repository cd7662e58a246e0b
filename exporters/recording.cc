#include "exporters/recording.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "exporters/detail/evidence_json.h"
#include "exporters/json_report.h"
#include "profiler/detail/format.h"
#include "profiler/gpu_activity_wire.h"

namespace feedscope {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using detail::fmt;
using detail::JsonIn;

namespace {

constexpr const char* kManifest = "recording.json";
constexpr const char* kInput = "input.json";
constexpr const char* kGpu = "gpu.fsgpu";
constexpr const char* kSteps = "steps.json";
constexpr const char* kExpect = "expect.json";
constexpr const char* kExpectSchema = "feedscope.recording.expect/1";
// Records per frame: a frame's payload stays far below the wire format's 1 GiB limit.
constexpr std::size_t kFrameRecords = 100'000;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kAlways = std::numeric_limits<std::int64_t>::min();

// --- the cap ------------------------------------------------------------------------------------

// `time(r)` of every record `r` for which `keep(r)`, in order.
template <typename Keep, typename Time>
std::vector<std::int64_t> sorted_times(const GpuActivity& a, Keep keep, Time time) {
  std::vector<std::int64_t> out;
  const auto add = [&](const auto& records) {
    for (const auto& r : records)
      if (keep(r)) out.push_back(time(r));
  };
  add(a.kernels);
  add(a.memcpys);
  add(a.memsets);
  add(a.syncs);
  add(a.runtime);
  std::sort(out.begin(), out.end());
  return out;
}

// Every record's start, of those that end after `after_ns`.
std::vector<std::int64_t> starts_ending_after(const GpuActivity& a, std::int64_t after_ns) {
  return sorted_times(a, [after_ns](const auto& r) { return r.end_ns > after_ns; },
                      [](const auto& r) { return r.start_ns; });
}

// Every record's end.
std::vector<std::int64_t> ends_of(const GpuActivity& a) {
  return sorted_times(a, [](const auto&) { return true; }, [](const auto& r) { return r.end_ns; });
}

// The records that end after `after_ns` and begin before `before_ns`; the others are counted in
// not_kept, and kept_until_ns says where the kept ones stop.
GpuActivity keep_between(const GpuActivity& a, std::int64_t after_ns, std::int64_t before_ns) {
  GpuActivity out;
  const auto copy = [&](const auto& from, auto& to) {
    for (const auto& r : from)
      if (r.end_ns > after_ns && r.start_ns < before_ns) to.push_back(r);
  };
  copy(a.kernels, out.kernels);
  copy(a.memcpys, out.memcpys);
  copy(a.memsets, out.memsets);
  copy(a.syncs, out.syncs);
  copy(a.runtime, out.runtime);
  for (const TimeWindow& w : a.traced_windows)
    if (w.end_ns > after_ns && w.begin_ns < before_ns) out.traced_windows.push_back(w);
  out.outside_windows = a.outside_windows;
  out.tracing = a.tracing;
  out.dropped = a.dropped;
  out.bad_timestamps = a.bad_timestamps;
  out.incomplete_buffers = a.incomplete_buffers;
  out.not_kept = a.not_kept + (a.records() - out.records());
  out.kept_until_ns = std::min(a.kept_until_ns, before_ns);
  return out;
}

// A run's cap: whole measured steps from the first, and the records that reach into them (not the
// warm-up's). At least the first step is kept, however many records it holds.
RecordedGpu first_steps(const RecordedGpu& gpu, std::vector<StepWindow> steps, std::size_t max_records) {
  RecordedGpu out;
  out.steps_complete_until_ns = gpu.steps_complete_until_ns;
  out.measured_begin_ns = gpu.measured_begin_ns;
  std::int64_t first_begin = kNever;
  for (const StepWindow& w : steps) first_begin = std::min(first_begin, w.begin_ns);
  const std::vector<std::int64_t> starts = starts_ending_after(gpu.activity, first_begin);
  std::int64_t until = steps.front().end_ns;
  for (const StepWindow& w : steps) {
    const auto n = static_cast<std::size_t>(
        std::lower_bound(starts.begin(), starts.end(), w.end_ns) - starts.begin());
    if (n > max_records) break;
    until = w.end_ns;
  }
  out.activity = keep_between(gpu.activity, first_begin, until);
  for (const StepWindow& w : steps)
    if (w.end_ns <= until) out.steps.push_back(w);
  return out;
}

// A watched program's cap: the records of its last whole seconds that fit, up to its last record
// (its steady state: a program's start-up, cuDNN's autotuning, compilation, the first batches,
// is at its beginning, and a cap that kept the records that began first read imagenet's resnet50
// as launch-bound on cuDNN's start-up where the whole run was GPU-bound). Where its last second
// alone holds more, the records that ended last.
RecordedGpu last_seconds(const RecordedGpu& gpu, const std::vector<StepWindow>& steps,
                         std::size_t max_records) {
  const std::vector<std::int64_t> ends = ends_of(gpu.activity);
  const std::int64_t last = ends.back();
  // Those that end after it are at most the max_records that ended last (ties with it are out);
  // whole seconds back from the last end are later still, and hold no more.
  std::int64_t after = ends[ends.size() - max_records - 1];
  constexpr std::int64_t kSecond = 1'000'000'000;
  if (const std::int64_t seconds = (last - after) / kSecond; seconds >= 1)
    after = last - seconds * kSecond;
  RecordedGpu out;
  out.steps_complete_until_ns = gpu.steps_complete_until_ns;
  out.measured_begin_ns = gpu.measured_begin_ns;
  out.activity = keep_between(gpu.activity, after, kNever);
  for (const StepWindow& w : steps)
    if (w.begin_ns > after) out.steps.push_back(w);
  return out;
}

// At most `max_records` of `gpu`'s records (0: all): a run's first whole steps, a watched
// program's last whole seconds.
RecordedGpu capped(const RecordedGpu& gpu, std::size_t max_records, bool run) {
  if (max_records == 0 || gpu.activity.records() <= max_records) return gpu;
  std::vector<StepWindow> steps = gpu.steps;
  std::sort(steps.begin(), steps.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.end_ns < b.end_ns; });
  if (run && !steps.empty()) return first_steps(gpu, std::move(steps), max_records);
  return last_seconds(gpu, steps, max_records);
}

// --- writing ------------------------------------------------------------------------------------

// The records as frames of at most kFrameRecords records of one kind; the counts the source kept
// (dropped, not kept, ...) and a sampled trace's windows travel once, in the first frame, as
// GpuActivity::append sums and joins them, after how the records were traced where that is known.
std::string gpu_frames(const GpuActivity& a) {
  GpuActivity head;
  head.dropped = a.dropped;
  head.not_kept = a.not_kept;
  head.kept_until_ns = a.kept_until_ns;
  head.bad_timestamps = a.bad_timestamps;
  head.incomplete_buffers = a.incomplete_buffers;
  head.outside_windows = a.outside_windows;
  head.traced_windows = a.traced_windows;
  std::string out = a.tracing ? encode_gpu_tracing(*a.tracing) : std::string();
  out += encode_gpu_activity(head);
  const auto frames_of = [&out](const auto& records, auto member) {
    for (std::size_t i = 0; i < records.size(); i += kFrameRecords) {
      GpuActivity part;
      (part.*member).assign(records.begin() + static_cast<std::ptrdiff_t>(i),
                            records.begin() + static_cast<std::ptrdiff_t>(std::min(records.size(), i + kFrameRecords)));
      out += encode_gpu_activity(part);
    }
  };
  frames_of(a.kernels, &GpuActivity::kernels);
  frames_of(a.memcpys, &GpuActivity::memcpys);
  frames_of(a.memsets, &GpuActivity::memsets);
  frames_of(a.syncs, &GpuActivity::syncs);
  frames_of(a.runtime, &GpuActivity::runtime);
  return out;
}

ojson ns_or_null(std::int64_t ns) { return ns == kNever ? ojson(nullptr) : ojson(ns); }

ojson steps_json(const RecordedGpu& gpu) {
  ojson windows = ojson::array();
  for (const StepWindow& w : gpu.steps) windows.push_back({w.begin_ns, w.end_ns});
  return {{"measured_begin_ns", gpu.measured_begin_ns},
          {"complete_until_ns", ns_or_null(gpu.steps_complete_until_ns)},
          {"windows", windows}};
}

ojson replayed_json(const Replayed& r) {
  return {{"diagnosis", detail::diagnosis_json(r.diagnosis)},
          {"gpu_trace", r.gpu_trace ? detail::gpu_trace_json(*r.gpu_trace) : ojson(nullptr)}};
}

void write(const fs::path& dir, const char* name, const std::string& text, std::uintmax_t& bytes) {
  write_file_atomically((dir / name).string(), text);
  bytes += text.size();
}

// --- reading ------------------------------------------------------------------------------------

nlohmann::json read_json(const fs::path& dir, const char* name) {
  const fs::path file = dir / name;
  std::ifstream in(file);
  if (!in) throw RecordingError(file.string() + ": missing (not a feedscope recording, or an incomplete one)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw RecordingError(file.string() + ": not JSON: " + e.what());
  }
}

// Runs `read`, turning a key's error into a RecordingError naming the file's path.
template <typename Fn>
auto reading(const fs::path& dir, Fn&& read) {
  try {
    return read();
  } catch (const detail::JsonKeyError& e) {
    throw RecordingError((dir / e.what()).string());
  }
}

Replayed replayed_from(const JsonIn& j) {
  Replayed r;
  r.diagnosis = detail::diagnosis_from(j.at("diagnosis"));
  if (const JsonIn g = j.at("gpu_trace"); !g.is_null()) r.gpu_trace = detail::gpu_trace_from(g);
  return r;
}

// --- comparing ----------------------------------------------------------------------------------

bool close(double a, double b, double tolerance) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  return std::fabs(a - b) <= tolerance * std::max(std::fabs(a), std::fabs(b)) + 1e-12;
}

std::string number_text(const std::optional<double>& v) {
  if (!v) return "null";
  std::ostringstream s;
  s.precision(10);
  s << *v;
  return s.str();
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

void compare_number(const std::string& what, const std::optional<double>& got,
                    const std::optional<double>& expected, double tolerance,
                    std::vector<std::string>& out) {
  if (got.has_value() == expected.has_value() && (!got || close(*got, *expected, tolerance))) return;
  out.push_back(what + ": " + number_text(got) + ", expected " + number_text(expected));
}

// Two JSON objects of the same writer, key by key: numbers within the tolerance, the rest equal.
void compare_json(const std::string& prefix, const ojson& got, const ojson& expected,
                  double tolerance, std::vector<std::string>& out) {
  for (const auto& [key, want] : expected.items()) {
    const std::string what = prefix + key;
    const auto it = got.find(key);
    if (it == got.end()) {
      out.push_back(what + ": missing");
    } else if (want.is_number() && it->is_number()) {
      compare_number(what, it->get<double>(), want.get<double>(), tolerance, out);
    } else if (want.is_object() && it->is_object()) {
      compare_json(what + ".", *it, want, tolerance, out);
    } else if (*it != want) {
      out.push_back(what + ": " + it->dump() + ", expected " + want.dump());
    }
  }
}

}  // namespace

Replayed diagnose_with(const Recording& r, const std::optional<GpuTraceSummary>& gpu_trace) {
  Replayed out;
  out.gpu_trace = gpu_trace;
  if (r.run) {
    DiagnosisInput in = *r.run;
    in.gpu_trace = gpu_trace;
    out.diagnosis = diagnose(in);
  } else if (r.watch) {
    WatchDiagnosisInput in = *r.watch;
    in.gpu_trace = gpu_trace;
    out.diagnosis = diagnose_watched(in);
  }
  return out;
}

Replayed replay(const Recording& r) {
  std::optional<GpuTraceSummary> g;
  if (r.gpu && r.run)
    g = summarize_measured_steps(r.gpu->activity, r.gpu->steps, r.gpu->steps_complete_until_ns,
                                 r.gpu->measured_begin_ns);
  else if (r.gpu)
    g = summarize_program_activity(r.gpu->activity, kernel_active_windows(r.gpu->activity));
  return diagnose_with(r, g);
}

RecordingWritten write_recording(const fs::path& dir, const Recording& recording,
                                 const Replayed& produced, std::size_t max_records) {
  if (recording.run.has_value() == recording.watch.has_value())
    throw std::invalid_argument("write_recording: a recording is of a run or of a watch");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create recording directory '" + dir.string() + "': " + ec.message());
  RecordingWritten written;
  Recording kept;
  kept.run = recording.run;
  kept.watch = recording.watch;
  kept.gpu_trace_unavailable = recording.gpu_trace_unavailable;
  if (recording.gpu) {
    kept.gpu = capped(*recording.gpu, max_records, recording.run.has_value());
    written.records_kept = kept.gpu->activity.records();
    written.records_left_out = recording.gpu->activity.records() - written.records_kept;
  }

  std::uintmax_t& bytes = written.bytes;
  ojson gpu = nullptr;
  if (kept.gpu)
    gpu = {{"file", kGpu},
           {"records", written.records_kept},
           {"records_seen", written.records_kept + written.records_left_out},
           {"records_left_out", written.records_left_out},
           {"max_records", max_records}};
  const ojson manifest = {{"schema", kRecordingSchema},
                          {"kind", recording.run ? "run" : "watch"},
                          {"gpu", gpu},
                          {"gpu_trace_unavailable", recording.gpu_trace_unavailable}};
  write(dir, kManifest, manifest.dump(2) + "\n", bytes);
  const ojson input = recording.run ? detail::diagnosis_input_json(*recording.run)
                                    : detail::watch_input_json(*recording.watch);
  write(dir, kInput, input.dump(1) + "\n", bytes);
  for (const char* stale : {kGpu, kSteps}) fs::remove(dir / stale, ec);
  if (kept.gpu) {
    write(dir, kGpu, gpu_frames(kept.gpu->activity), bytes);
    if (recording.run) write(dir, kSteps, steps_json(*kept.gpu).dump() + "\n", bytes);
  }

  // Where records were left out, the replay of those kept is what a replay must give.
  Replayed expected = produced;
  ojson run_block = nullptr;
  if (written.records_left_out > 0) {
    expected = replay(kept);
    run_block = replayed_json(produced);
    written.verdict_kept = expected.diagnosis.bottleneck == produced.diagnosis.bottleneck &&
                           expected.diagnosis.rules == produced.diagnosis.rules;
  }
  const ojson expect = {{"schema", kExpectSchema},
                        {"diagnosis", detail::diagnosis_json(expected.diagnosis)},
                        {"gpu_trace", expected.gpu_trace ? detail::gpu_trace_json(*expected.gpu_trace)
                                                         : ojson(nullptr)},
                        {"run", run_block},
                        {"fabricated_by", recording.fabricated_by.empty() ? ojson(nullptr)
                                                                           : ojson(recording.fabricated_by)}};
  write(dir, kExpect, expect.dump(2) + "\n", bytes);

  try {
    written.replay_differences = compare_replay(replay(read_recording(dir)), expected);
  } catch (const RecordingError& e) {
    written.replay_differences.push_back(std::string("cannot be read back: ") + e.what());
  }
  return written;
}

std::string describe_recording(const fs::path& dir, const RecordingWritten& w) {
  std::string out = "feedscope: recording in " + dir.string() + ": " + std::to_string(w.records_kept) +
                    " GPU records";
  if (w.records_left_out > 0)
    out += " (" + std::to_string(w.records_left_out) + " left out past " + kRecordMaxRecordsEnv + ")";
  out += fmt(", %.2f MB", static_cast<double>(w.bytes) / 1e6);
  if (!w.replay_differences.empty())
    out += "; its replay differs from what it expects (" + std::to_string(w.replay_differences.size()) +
           " differences, the first: " + w.replay_differences.front() + ")";
  else
    out += "; it replays to the same diagnosis";
  if (!w.verdict_kept)
    out += "; the records kept give another verdict than the run's: raise " + std::string(kRecordMaxRecordsEnv);
  return out;
}

Recording read_recording(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw RecordingError(dir.string() + ": not a directory");
  const nlohmann::json manifest_json = read_json(dir, kManifest);
  const nlohmann::json input_json = read_json(dir, kInput);
  return reading(dir, [&] {
    Recording r;
    const JsonIn manifest(manifest_json, kManifest);
    if (const std::string schema = manifest.at("schema").text(); schema != kRecordingSchema)
      manifest.at("schema").fail("'" + schema + "', this feedscope reads '" + kRecordingSchema + "'");
    const std::string kind = manifest.at("kind").text();
    const JsonIn input(input_json, kInput);
    if (kind == "run") {
      r.run = detail::diagnosis_input_from(input);
    } else if (kind == "watch") {
      r.watch = detail::watch_input_from(input);
    } else {
      manifest.at("kind").fail("'" + kind + "', not run or watch");
    }
    r.gpu_trace_unavailable = manifest.at("gpu_trace_unavailable").text();
    const JsonIn gpu = manifest.at("gpu");
    if (gpu.is_null()) return r;
    r.records_seen = gpu.at("records_seen").unsigned_integer();
    r.records_left_out = gpu.at("records_left_out").unsigned_integer();
    const fs::path file = dir / gpu.at("file").text();
    GpuActivityStream s = read_gpu_activity(file);
    if (!s.error.empty()) throw RecordingError(s.error);
    if (s.torn_tail) throw RecordingError(file.string() + ": ends inside a frame at byte " + std::to_string(s.offset) + " (cut short)");
    if (s.activity.records() != gpu.at("records").unsigned_integer())
      gpu.at("records").fail(std::to_string(gpu.at("records").unsigned_integer()) + " records, but " +
                             file.filename().string() + " holds " + std::to_string(s.activity.records()));
    r.gpu.emplace();
    r.gpu->activity = std::move(s.activity);
    if (!r.run) return r;
    const nlohmann::json steps_json = read_json(dir, kSteps);
    const JsonIn steps(steps_json, kSteps);
    r.gpu->measured_begin_ns = steps.at("measured_begin_ns").integer();
    if (const JsonIn until = steps.at("complete_until_ns"); !until.is_null())
      r.gpu->steps_complete_until_ns = until.integer();
    const JsonIn windows = steps.at("windows");
    for (std::size_t i = 0; i < windows.size(); ++i) {
      const JsonIn w = windows.at(i);
      if (w.size() != 2) w.fail("not a [begin_ns, end_ns] pair");
      r.gpu->steps.push_back({w.at(std::size_t{0}).integer(), w.at(std::size_t{1}).integer()});
    }
    return r;
  });
}

Expectation read_expectation(const fs::path& dir) {
  const nlohmann::json j = read_json(dir, kExpect);
  return reading(dir, [&] {
    const JsonIn expect(j, kExpect);
    if (const std::string schema = expect.at("schema").text(); schema != kExpectSchema)
      expect.at("schema").fail("'" + schema + "', this feedscope reads '" + kExpectSchema + "'");
    Expectation e;
    e.expected = replayed_from(expect);
    if (const JsonIn run = expect.at("run"); !run.is_null()) e.run = replayed_from(run);
    if (j.contains("fabricated_by") && !j.at("fabricated_by").is_null())  // since #54
      e.fabricated_by = expect.at("fabricated_by").text();
    return e;
  });
}

std::vector<std::string> compare_replay(const Replayed& got, const Replayed& expected, double tolerance) {
  std::vector<std::string> out;
  const Diagnosis& g = got.diagnosis;
  const Diagnosis& e = expected.diagnosis;
  if (g.bottleneck != e.bottleneck) out.push_back("bottleneck: " + g.bottleneck + ", expected " + e.bottleneck);
  if (g.input_bound != e.input_bound) out.push_back("input_bound: " + g.input_bound + ", expected " + e.input_bound);
  if (g.data_stall_source != e.data_stall_source)
    out.push_back("data_stall_source: '" + g.data_stall_source + "', expected '" + e.data_stall_source + "'");
  compare_number("data_stall_ratio", g.data_stall_ratio, e.data_stall_ratio, tolerance, out);
  if (g.rules != e.rules) out.push_back("rules: " + joined(g.rules) + "; expected " + joined(e.rules));
  std::vector<std::string> settings_got, settings_expected;
  for (const Recommendation& r : g.recommendations) settings_got.push_back(r.setting);
  for (const Recommendation& r : e.recommendations) settings_expected.push_back(r.setting);
  if (settings_got != settings_expected) {
    out.push_back("recommendations: " + joined(settings_got) + "; expected " + joined(settings_expected));
  } else {
    for (std::size_t i = 0; i < g.recommendations.size(); ++i) {
      const std::string what = "recommendation " + g.recommendations[i].setting;
      compare_number(what + " predicted_speedup", g.recommendations[i].predicted_speedup,
                     e.recommendations[i].predicted_speedup, tolerance, out);
      compare_number(what + " predicted_samples_per_s", g.recommendations[i].predicted_samples_per_s,
                     e.recommendations[i].predicted_samples_per_s, tolerance, out);
    }
  }
  if (got.gpu_trace.has_value() != expected.gpu_trace.has_value())
    out.push_back(std::string("gpu_trace: ") + (got.gpu_trace ? "present" : "absent") + ", expected " +
                  (expected.gpu_trace ? "present" : "absent"));
  else if (got.gpu_trace)
    compare_json("gpu_trace.", detail::gpu_trace_json(*got.gpu_trace),
                 detail::gpu_trace_json(*expected.gpu_trace), tolerance, out);
  return out;
}

namespace {

std::string records_line(const Recording& r) {
  if (!r.gpu) return "no GPU trace" + (r.gpu_trace_unavailable.empty() ? "" : " (" + r.gpu_trace_unavailable + ")");
  std::string out = std::to_string(r.gpu->activity.records()) + " GPU records";
  if (r.records_left_out > 0)
    out += " (" + std::to_string(r.records_left_out) + " of the " + std::to_string(r.records_seen) +
           " the run had left out by the recording's cap)";
  return out;
}

}  // namespace

std::string format_replay(const fs::path& dir, const Recording& recording, const Replayed& replayed,
                          const std::optional<Expectation>& expect) {
  const Diagnosis& d = replayed.diagnosis;
  std::string out = "feedscope replay: " + dir.string() + " (" + (recording.run ? "run" : "watch") +
                    ", " + records_line(recording) + ")\n";
  out += "feedscope: " + d.verdict + "\n";
  out += "  bottleneck: " + (d.bottleneck.empty() ? std::string("none (not measured)") : d.bottleneck) +
         "   input-bound: " + d.input_bound + "\n";
  if (const auto& g = replayed.gpu_trace)
    out += fmt("  gpu: %lld steps, %.1f kernels/step (mean %.1f us), busy %.0f%% of step time", static_cast<long long>(g->steps),
               g->kernels_per_step, g->mean_kernel_us, 100 * g->gpu_busy_ratio) +
           fmt(", %.2f syncs/step, H2D %.0f%% of step time\n", g->syncs_per_step, 100 * g->h2d_share);
  out += "  rules: " + joined(d.rules) + "\n  evidence:\n";
  for (const std::string& e : d.evidence) out += "    - " + e + "\n";
  if (!d.recommendations.empty()) out += "  recommendations:\n";
  for (const Recommendation& r : d.recommendations) {
    out += "    - " + r.action + "\n";
    out += "      " + (r.setting.empty() ? std::string() : "setting " + r.setting + " ") +
           (r.predicted_speedup ? fmt("-> predicted %.2fx", *r.predicted_speedup) : std::string("(no prediction)")) + "\n";
  }
  if (!expect) {
    out += "expect.json: none\n";
    return out;
  }
  const std::vector<std::string> differences = compare_replay(replayed, expect->expected);
  if (differences.empty()) {
    out += "expect.json: the same (bottleneck, rules, advice, GPU figures)\n";
  } else {
    out += "expect.json: differs:\n";
    for (const std::string& line : differences) out += "  - " + line + "\n";
  }
  if (expect->run) {
    // Today's rules over the run's own summary, made of every record before the cap.
    const Diagnosis run = diagnose_with(recording, expect->run->gpu_trace).diagnosis;
    if (run.bottleneck != d.bottleneck || run.rules != d.rules)
      out += "the run's own GPU summary reads " + run.bottleneck + " (" + joined(run.rules) +
             "): the recording's cap changed the verdict\n";
  }
  return out;
}

std::string replay_to_json(const fs::path& dir, const Recording& recording, const Replayed& replayed,
                           const std::optional<Expectation>& expect) {
  ojson j = {{"recording", dir.string()},
             {"kind", recording.run ? "run" : "watch"},
             {"records", recording.gpu ? ojson(recording.gpu->activity.records()) : ojson(nullptr)},
             {"records_left_out", recording.records_left_out},
             {"diagnosis", detail::diagnosis_json(replayed.diagnosis)},
             {"gpu_trace", replayed.gpu_trace ? detail::gpu_trace_json(*replayed.gpu_trace) : ojson(nullptr)},
             {"expect", nullptr}};
  if (expect) j["expect"] = {{"differences", compare_replay(replayed, expect->expected)}};
  return j.dump(2) + "\n";
}

std::string recording_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv(kRecordDirEnv);
  return env ? env : "";
}

std::size_t recording_max_records() {
  const char* env = std::getenv(kRecordMaxRecordsEnv);
  if (!env || !*env) return kRecordMaxRecords;
  const std::string text = env;
  if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 15)
    throw std::invalid_argument(std::string(kRecordMaxRecordsEnv) + "='" + text +
                                "': a whole number of records, 0 or more (0: keep all)");
  return static_cast<std::size_t>(std::stoull(text));
}

}  // namespace feedscope
