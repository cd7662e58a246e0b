// libFuzzer target: every /proc parser of sampler/proc_fs.h on the same bytes. They run on the
// sampling path, so any input must give a value or "unavailable", never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sampler/proc_fs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const std::vector<std::string> devices = {"sda", "vda", "nvme0n1", "dm-0", "md0"};
  feedscope::parse_cpu_times(text);
  feedscope::parse_core_times(text);
  feedscope::parse_task_cpu_ticks(text);
  feedscope::parse_meminfo(text);
  feedscope::parse_process_status(text);
  feedscope::parse_diskstats(text, devices);
  feedscope::parse_io_read_bytes(text);
  feedscope::parse_pressure(text);
  return 0;
}
