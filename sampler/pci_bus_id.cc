#include "sampler/pci_bus_id.h"

#include <charconv>

namespace feedscope {

namespace {

// Parses 1..max_digits hex digits of `s` from `pos` up to `end_char` (or the end when 0), at most
// `limit`; advances `pos` past the separator.
bool hex_field(std::string_view s, std::size_t& pos, char end_char, std::size_t max_digits,
               unsigned limit, unsigned& out) {
  const std::size_t stop = end_char ? s.find(end_char, pos) : s.size();
  if (stop == std::string_view::npos || stop == pos || stop - pos > max_digits) return false;
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(s.data() + pos, s.data() + stop, value, 16);
  if (ec != std::errc() || ptr != s.data() + stop || value > limit) return false;
  out = value;
  pos = end_char ? stop + 1 : stop;
  return true;
}

}  // namespace

std::optional<PciAddress> parse_pci_bus_id(std::string_view id) {
  PciAddress a;
  std::size_t pos = 0;
  if (!hex_field(id, pos, ':', 8, 0xffffffffu, a.domain) ||
      !hex_field(id, pos, ':', 2, 0xff, a.bus) || !hex_field(id, pos, '.', 2, 0x1f, a.device) ||
      !hex_field(id, pos, 0, 1, 7, a.function))
    return std::nullopt;
  return a;
}

std::vector<int> cuda_index_of_nvml_devices(const std::vector<std::string>& nvml_bus_ids,
                                            const std::vector<std::string>& cuda_bus_ids) {
  std::vector<std::optional<PciAddress>> cuda;
  for (const std::string& id : cuda_bus_ids) cuda.push_back(parse_pci_bus_id(id));
  std::vector<int> out;
  for (const std::string& id : nvml_bus_ids) {
    int index = -1;
    if (const auto nvml = parse_pci_bus_id(id)) {
      for (std::size_t i = 0; i < cuda.size(); ++i)
        if (cuda[i] == nvml) index = static_cast<int>(i);
    }
    out.push_back(index);
  }
  return out;
}

}  // namespace feedscope
