#include "exporters/rank_address.h"

#include <charconv>
#include <stdexcept>

namespace feedscope {

namespace {

constexpr std::string_view kPlaceholder = "{local_rank}";

}  // namespace

RankAddress metrics_address_of_rank(const std::string& address, const RankIdentity& rank) {
  RankAddress out{address, 0, ""};
  const bool local = rank.local_rank.has_value();
  const std::optional<int> n = local ? rank.local_rank : rank.rank;
  const std::string what = local ? "local rank" : "rank";
  if (const std::size_t at = address.find(kPlaceholder); at != std::string::npos) {
    if (!n)
      throw std::invalid_argument("metrics_addr: \"" + address + "\" has " + std::string(kPlaceholder) +
                                  ", and no launcher's variables name this process's rank");
    out.address.replace(at, kPlaceholder.size(), std::to_string(*n));
    out.how = std::string(kPlaceholder) + " is " + what + " " + std::to_string(*n);
    return out;
  }
  if (!rank.rank || !n || *n == 0) return out;
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) return out;  // malformed: the endpoint names it
  const std::string_view text = std::string_view(address).substr(colon + 1);
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port <= 0) return out;
  if (port + *n > 65535)
    throw std::invalid_argument("metrics_addr: \"" + address + "\" of " + what + " " + std::to_string(*n) +
                                " listens on port " + std::to_string(port) + " + " + std::to_string(*n) +
                                " = " + std::to_string(port + *n) +
                                ", past 65535: give a lower port, or {local_rank} where the port's "
                                "digits go");
  out.address = address.substr(0, colon + 1) + std::to_string(port + *n);
  out.port_offset = *n;
  out.how = "port " + std::to_string(port) + " + " + what + " " + std::to_string(*n) + " (" +
            rank.source + "), so that the ranks of one machine do not share a port";
  return out;
}

}  // namespace feedscope
