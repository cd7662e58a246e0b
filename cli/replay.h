#pragma once
// `feedscope replay DIR [--json]`: a recording of `run` or `watch` (exporters/recording.h) through
// the same GPU summary and the same diagnosis, on any machine; the diagnosis printed, and how it
// compares with the recording's expect.json. Throws RecordingError (exit 2) where the recording
// cannot be read, naming the file and the key.
#include <ostream>
#include <string>

namespace feedscope {

int replay_command(const std::string& dir, bool json, std::ostream& out);

}  // namespace feedscope
