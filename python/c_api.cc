// The C ABI of include/feedscope/feedscope_c.h over feedscope::Session. Every entry point catches: no C++
// exception may unwind into a C caller (ctypes, a CPython interpreter).
#include <feedscope/feedscope_c.h>
#include "exporters/session_access.h"
#include "python/detail/c_support.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporters/json_report.h"
#include <feedscope/session.h>
#include "loader/span_recorder.h"

namespace feedscope::c_api {

std::string& last_error() {
  thread_local std::string text;
  return text;
}

}  // namespace feedscope::c_api

namespace {

using feedscope::c_api::fail;
using feedscope::c_api::guarded;

// Reads each option it is asked for and remembers its name, so the names it knows are the ones it
// reads: a key of the JSON that no take() asked for is an unknown option.
class OptionReader {
 public:
  OptionReader(const nlohmann::json& j, const char* what) : j_(j), what_(what) {}

  // Absent or null: `out` stays as it was. An integer takes only a JSON integer in its range (2.5
  // or 1e12 for num_workers is an error, not 2 or a wrapped value).
  template <typename T>
  void take(const char* key, T& out, const char* type) {
    known_.emplace_back(key);
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    const auto wrong = [&] {
      return std::invalid_argument(std::string(what_) + " '" + key + "': expected " + type +
                                   ", got " + it->dump());
    };
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!it->is_number_integer()) throw wrong();
      if (it->is_number_unsigned() ? it->template get<std::uint64_t>() >
                                         static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                                   : !std::in_range<T>(it->template get<std::int64_t>()))
        throw wrong();
    }
    try {
      out = it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      throw wrong();
    }
  }
  template <typename T>
  void take(const char* key, std::optional<T>& out, const char* type) {
    T value{};
    const auto it = j_.find(key);
    const bool given = it != j_.end() && !it->is_null();
    take(key, value, type);
    if (given) out = value;
  }

  void refuse_unknown() const {
    for (const auto& [key, value] : j_.items()) {
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string allowed;
      for (const std::string& k : known_) allowed += (allowed.empty() ? "" : ", ") + k;
      throw std::invalid_argument("unknown " + std::string(what_) + " '" + key +
                                  "'; allowed: " + allowed);
    }
  }

 private:
  const nlohmann::json& j_;
  const char* what_;  // "option", "loader setting": how a message names a key
  std::vector<std::string> known_;
};

nlohmann::json parse_object(const char* text, const char* what) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::invalid_argument(std::string(what) + ": not a JSON object: " + text);
  return j;
}

feedscope::Session::Options parse_options(const char* text) {
  feedscope::Session::Options o;
  if (text == nullptr || *text == '\0') return o;
  const nlohmann::json j = parse_object(text, "options");
  OptionReader r(j, "option");
  r.take("report_dir", o.report_dir, "a string");
  r.take("warmup", o.warmup, "an integer");
  r.take("metrics_addr", o.metrics_addr, "a string");
  r.take("rank", o.rank, "an integer");
  r.take("host", o.host, "a string");
  r.take("sample_hz", o.sample_hz, "a number");
  r.take("timeseries_max_mib", o.timeseries_max_mib, "an integer");
  r.take("batch_size", o.batch_size, "an integer");
  r.take("num_workers", o.num_workers, "an integer");
  r.take("pin_memory", o.pin_memory, "true or false");
  r.take("prefetch_factor", o.prefetch_factor, "an integer");
  r.take("persistent_workers", o.persistent_workers, "true or false");
  r.take("device", o.device, "a string");
  r.take("print", o.print, "true or false");
  r.take("trace_gpu", o.trace_gpu, "true or false");
  r.take("gpu_trace", o.gpu_trace, "a string");
  r.take("gpu_trace_lead", o.gpu_trace_lead, "a number");
  r.take("trace_max_spans", o.trace_max_spans, "an integer");
  r.refuse_unknown();
  return o;
}

feedscope::Session::LoaderSettings parse_loader_settings(const char* text) {
  feedscope::Session::LoaderSettings l;
  if (text == nullptr) throw std::invalid_argument("loader settings: NULL");
  const nlohmann::json j = parse_object(text, "loader settings");
  OptionReader r(j, "loader setting");
  r.take("num_workers", l.num_workers, "an integer");
  r.take("batch_size", l.batch_size, "an integer");
  r.take("pin_memory", l.pin_memory, "true or false");
  r.take("prefetch_factor", l.prefetch_factor, "an integer");
  r.take("persistent_workers", l.persistent_workers, "true or false");
  r.refuse_unknown();
  return l;
}

bool usable(feedscope_session* s) {
  if (s == nullptr) {
    fail("no session (NULL)");
    return false;
  }
  if (s->owner != ::getpid()) {
    fail("the session belongs to process " + std::to_string(s->owner) +
         "; a forked child cannot record into it");
    return false;
  }
  if (s->report_json) {
    fail("the session is finished: nothing more can be recorded");
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

int feedscope_abi_version(void) { return FEEDSCOPE_C_ABI_VERSION; }

const char* feedscope_last_error(void) { return feedscope::c_api::last_error().c_str(); }

int64_t feedscope_now_ns(void) { return feedscope::now_ns(); }

feedscope_session* feedscope_session_create(const char* options_json) {
  auto s = std::make_unique<feedscope_session>();
  const int rc = guarded([&] {
    s->session = std::make_unique<feedscope::Session>(parse_options(options_json));
    s->metrics_address = s->session->metrics_address();
  });
  return rc == 0 ? s.release() : nullptr;
}

void feedscope_session_destroy(feedscope_session* session) {
  if (session == nullptr) return;
  if (session->owner != ::getpid()) {  // a fork's copy: its threads are not here to join
    (void)session->session.release();
    return;
  }
  if (session->sink) session->sink->close();  // loaders that outlive it forward nothing more
  guarded([&] { delete session; });  // ~Session finishes, and reports a failure on stderr
}

int feedscope_loader_settings(feedscope_session* s, const char* settings_json) {
  if (!usable(s)) return -1;
  return guarded([&] { s->session->set_loader_settings(parse_loader_settings(settings_json)); });
}

int feedscope_fetched(feedscope_session* s, int64_t begin_ns, int64_t end_ns, int got_batch) {
  if (!usable(s)) return -1;
  feedscope::SessionAccess::profiler(*s->session).fetched(begin_ns, end_ns, got_batch != 0);
  return 0;
}

int feedscope_step_done(feedscope_session* s, int64_t begin_ns, int64_t end_ns, int64_t samples) {
  if (!usable(s)) return -1;
  feedscope::SessionAccess::profiler(*s->session).step_done(begin_ns, end_ns, samples);
  return 0;
}

int feedscope_stage_id(feedscope_session* s, const char* name) {
  if (!usable(s)) return -1;
  int id = -1;
  guarded([&] { id = feedscope::SessionAccess::profiler(*s->session).custom_stage(name ? name : ""); });
  return id;
}

int feedscope_stage_done(feedscope_session* s, int stage_id, int64_t begin_ns, int64_t end_ns) {
  if (!usable(s)) return -1;
  if (stage_id < 0 || stage_id > 0xffff) return fail("stage id " + std::to_string(stage_id) +
                                                     " was not given by feedscope_stage_id");
  feedscope::SessionAccess::profiler(*s->session).custom_done(static_cast<feedscope::LoopProfiler::StageId>(stage_id),
                                     begin_ns, end_ns);
  return 0;
}

const char* feedscope_finish(feedscope_session* s) {
  if (s == nullptr) {
    fail("no session (NULL)");
    return nullptr;
  }
  if (s->report_json) return s->report_json->c_str();
  const int rc = guarded([&] { s->report_json = feedscope::report_to_json(feedscope::SessionAccess::finish(*s->session)); });
  return rc == 0 ? s->report_json->c_str() : nullptr;
}

const char* feedscope_metrics_address(feedscope_session* s) {
  if (s == nullptr) {
    fail("no session (NULL)");
    return nullptr;
  }
  return s->metrics_address.c_str();
}

}  // extern "C"
