#include "exporters/watch_channel.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "exporters/json_report.h"

namespace feedscope {

namespace {

std::vector<StageStats> stages_from(const nlohmann::json& object) {
  std::vector<StageStats> out;
  if (!object.is_object()) return out;
  for (const auto& [name, s] : object.items()) {
    StageStats st;
    st.name = name;
    st.count = s.value("count", std::int64_t{0});
    st.busy_s = s.value("busy_s", 0.0);
    st.mean_ms = s.value("mean_ms", 0.0);
    st.p50_ms = s.value("p50_ms", 0.0);
    st.p95_ms = s.value("p95_ms", 0.0);
    st.share = s.value("share", 0.0);
    st.lanes = s.value("lanes", 0);
    out.push_back(std::move(st));
  }
  return out;
}

std::optional<double> optional_from(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

SessionHandoff parse_handoff(int pid, const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  if (j.value("schema", std::string()) != kReportSchema)
    throw std::runtime_error("not a " + std::string(kReportSchema) + " report");
  SessionHandoff h;
  h.pid = pid;
  const nlohmann::json& t = j.at("throughput");
  h.throughput.samples_per_s = t.value("samples_per_s", 0.0);
  h.throughput.batches_per_s = t.value("batches_per_s", 0.0);
  h.throughput.steps = t.value("steps", std::int64_t{0});
  h.throughput.samples = t.value("samples", std::int64_t{0});
  h.throughput.wall_s = t.value("wall_s", 0.0);
  h.stages = stages_from(j.value("stages", nlohmann::json::object()));
  h.custom_stages = stages_from(j.value("custom_stages", nlohmann::json::object()));
  const nlohmann::json config = j.value("config", nlohmann::json::object());
  h.batch_size = config.value("batch_size", std::int64_t{0});
  h.num_workers = static_cast<int>(config.value("num_workers", std::int64_t{0}));
  h.device = j.value("environment", nlohmann::json::object()).value("device", std::string());
  const nlohmann::json training = j.value("training", nlohmann::json::object());
  h.training.model = training.value("model", std::string());
  h.training.parameters = training.value("parameters", std::int64_t{0});
  h.training.first_loss = optional_from(training, "first_loss");
  h.training.last_loss = optional_from(training, "last_loss");
  const nlohmann::json errors = j.value("data_errors", nlohmann::json::object());
  h.data_errors.policy = errors.value("policy", std::string("fail"));
  h.data_errors.count = errors.value("count", std::uint64_t{0});
  return h;
}

}  // namespace

std::optional<std::filesystem::path> watch_channel_dir() {
  const char* dir = std::getenv(kWatchDirEnv);
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  return std::filesystem::path(dir);
}

void hand_report_to_watcher(const std::filesystem::path& dir, const Report& report) {
  write_file_atomically((dir / ("session-" + std::to_string(::getpid()) + ".json")).string(),
                        report_to_json(report));
}

void hand_live_window(const std::filesystem::path& dir, const LiveWindow& w) {
  const nlohmann::json j = {{"rank", w.rank ? nlohmann::json(*w.rank) : nlohmann::json(nullptr)},
                            {"wall_s", w.wall_s},
                            {"wait_s", w.wait_s},
                            {"steps", w.steps},
                            {"end_ns", w.end_ns}};
  write_file_atomically((dir / ("live-" + std::to_string(::getpid()) + ".json")).string(), j.dump());
}

std::vector<LiveWindow> read_live_windows(const std::filesystem::path& dir) {
  std::vector<LiveWindow> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("live-", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    try {
      const nlohmann::json j = nlohmann::json::parse(text.str());
      LiveWindow w;
      w.pid = std::atoi(name.c_str() + 5);
      if (j.contains("rank") && j["rank"].is_number_integer()) w.rank = j["rank"].get<int>();
      w.wall_s = j.value("wall_s", 0.0);
      w.wait_s = j.value("wait_s", 0.0);
      w.steps = j.value("steps", std::int64_t{0});
      w.end_ns = j.value("end_ns", std::int64_t{0});
      out.push_back(w);
    } catch (const nlohmann::json::exception&) {
      // half-written by a writer that is not ours (ours rename whole files): the next poll reads it
    }
  }
  return out;
}

std::vector<SessionHandoff> read_session_handoffs(const std::filesystem::path& dir,
                                                  std::vector<std::string>& errors) {
  std::vector<SessionHandoff> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("session-", 0) != 0 || entry.path().extension() != ".json") continue;
    const int pid = std::atoi(name.c_str() + 8);
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    try {
      out.push_back(parse_handoff(pid, text.str()));
    } catch (const std::exception& e) {
      errors.push_back(entry.path().string() + ": " + e.what());
    }
  }
  std::sort(out.begin(), out.end(),
            [](const SessionHandoff& a, const SessionHandoff& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace feedscope
