#pragma once
// Where the Prometheus endpoint of one rank among several on a machine listens: the ranks of a
// node share its addresses, so a Session or a per-task `feedscope watch` given the same
// HOST:PORT in each rank (`127.0.0.1:9464`, as the README says) would collide on the port.
#include <string>

#include "sampler/rank_identity.h"

namespace feedscope {

struct RankAddress {
  std::string address;  // the address to listen on
  int port_offset = 0;  // what was added to the port given
  std::string how;      // how it was chosen, for the log; empty where the address is as given
};

// `address` with `{local_rank}` replaced by the rank's local rank where it has it; else its port
// plus the local rank (the rank where no launcher gave a local rank). Port 0 (any free port) and a
// process that is no rank keep the address as given. Throws std::invalid_argument naming the
// address, the rank and the port where the port runs past 65535.
RankAddress metrics_address_of_rank(const std::string& address, const RankIdentity& rank);

}  // namespace feedscope
