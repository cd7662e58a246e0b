// The feedscope program: parses the command line, maps errors to DESIGN.md's exit codes.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/config.h"
#include "cli/make_dataset.h"
#include "cli/probe.h"
#include "cli/run.h"
#include "exporters/console_report.h"
#include "exporters/json_report.h"
#include "loader/batch_loader.h"
#include "pinned_memory/errors.h"

namespace {

using namespace feedscope;

enum ExitCode { kDone = 0, kUsage = 2, kBadData = 3, kRuntime = 4 };

// Every config key as a command-line option. Values stay text until set_config_value() checks
// them, so the command line and YAML share one validation and one set of messages.
struct RunOptions {
  std::string config_file;
  std::map<std::string, std::string> values;
  std::map<std::string, CLI::Option*> options;

  void add_to(CLI::App& app) {
    app.add_option("--config", config_file, "YAML file of keys (the command line wins)");
    for (const KeyInfo& key : config_keys()) {
      std::string flag = "--" + std::string(key.name);
      for (char& c : flag) c = c == '_' ? '-' : c;
      const std::string help = std::string(key.help) + " [" + std::string(key.allowed) + "]";
      std::string& value = values[std::string(key.name)];
      CLI::Option* opt =
          key.type == KeyType::boolean
              ? app.add_flag(flag + "{on}", value, help)
              : app.add_option(flag, value, help);
      options[std::string(key.name)] = opt;
    }
    options["steps"]->excludes(options["duration"]);
  }

  void apply(RunConfig& config) const {
    if (!config_file.empty()) apply_yaml_file(config, config_file);
    for (const auto& [key, opt] : options)
      if (opt->count() > 0) set_config_value(config, key, values.at(key), opt->get_name());
  }
};

int run_and_print(const RunConfig& config) {
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  std::ostream& human = config.json ? std::cerr : std::cout;
  const Report report = run_profiled(config, std::cerr);
  human << "\n" << format_console_report(report, tty && !config.json);
  human << "\nreport: " << config.report_dir << "/report.json\n";
  if (config.json) std::cout << report_to_json(report);
  return kDone;
}

RunConfig demo_defaults() {
  RunConfig c;
  c.dataset = "synthetic:3x32x32";
  c.model = "mlp";
  c.hidden = 512;
  c.layers = 2;
  c.num_workers = 2;
  c.batch_size = 64;
  c.steps = 300;
  c.warmup = 20;
  c.report_dir = "feedscope-demo";
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"feedscope: feeds a libtorch training step as fast as the hardware allows, and "
               "says which stage of the input pipeline holds it back."};
  app.set_version_flag("--version", std::string("feedscope ") + FEEDSCOPE_VERSION);
  app.require_subcommand(1);

  CLI::App* probe = app.add_subcommand("probe", "CPUs, memory, disks, CUDA devices, CUPTI, NVML");
  bool probe_json_out = false;
  probe->add_flag("--json", probe_json_out, "print as JSON");

  CLI::App* demo = app.add_subcommand(
      "demo", "a profiled training run on embedded defaults; prints the diagnosis");
  RunOptions demo_options;
  demo_options.add_to(*demo);

  CLI::App* run = app.add_subcommand("run", "a profiled training run (or --loader-only)");
  RunOptions run_options;
  run_options.add_to(*run);

  const MakeDatasetCommand make_dataset(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kDone : kUsage;
  }

  try {
    if (make_dataset.chosen()) {
      make_dataset.run(std::cout);
      return kDone;
    }
    if (*probe) {
      std::cout << (probe_json_out ? probe_json() : probe_text());
      return kDone;
    }
    RunConfig config = *demo ? demo_defaults() : RunConfig{};
    (*demo ? demo_options : run_options).apply(config);
    return run_and_print(config);
  } catch (const ConfigError& e) {
    std::cerr << "feedscope: error: " << e.what() << "\n";
    return kUsage;
  } catch (const DatasetError& e) {
    std::cerr << "feedscope: error: " << e.what() << "\n";
    return kUsage;
  } catch (const SampleError& e) {
    std::cerr << "feedscope: bad data: " << e.what() << "\n";
    return kBadData;
  } catch (const DeviceError& e) {
    std::cerr << "feedscope: device error: " << e.what() << "\n";
    return kRuntime;
  } catch (const std::exception& e) {
    std::cerr << "feedscope: runtime failure: " << e.what() << "\n";
    return kRuntime;
  }
}
