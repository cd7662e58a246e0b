// libFuzzer target: a YAML run config (cli/config.h) as `feedscope run --config` reads it: parse
// and apply, check the relations between keys, list the effective values. Bad input must be a
// ConfigError, which the CLI turns into exit code 2; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  feedscope::RunConfig config;
  try {
    feedscope::apply_yaml(config, text, "fuzz.yaml");
    feedscope::validate_config(config);
    feedscope::config_entries(config);
  } catch (const feedscope::ConfigError&) {
  }
  return 0;
}
