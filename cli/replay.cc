#include "cli/replay.h"

#include <filesystem>
#include <optional>

#include "exporters/recording.h"

namespace feedscope {

int replay_command(const std::string& dir, bool json, std::ostream& out) {
  const Recording recording = read_recording(dir);
  const Replayed replayed = replay(recording);
  std::optional<Expectation> expect;
  if (std::filesystem::exists(std::filesystem::path(dir) / "expect.json")) expect = read_expectation(dir);
  out << (json ? replay_to_json(dir, recording, replayed, expect)
               : format_replay(dir, recording, replayed, expect));
  return 0;
}

}  // namespace feedscope
