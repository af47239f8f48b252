// [cluster]: the shared PostgreSQL queue (see ClusterConfig in daemon_config.hpp).
#include "daemon/config/config_reader.hpp"

namespace sandglass::daemon::config {
namespace {

ClusterConfig& cluster(DaemonConfig& c) { return c.cluster ? *c.cluster : c.cluster.emplace(); }

void set_kinds(DaemonConfig& c, const Entry& e) {
  constexpr std::string_view kExpected = "an array of kind names";
  std::vector<std::string> kinds;
  for (const toml::node& item : e.array(kExpected)) {
    const std::optional<std::string> name = item.value_exact<std::string>();
    if (!name || name->empty()) e.reject(kExpected);
    kinds.push_back(*name);
  }
  cluster(c).kinds = std::move(kinds);
}

constexpr Field<DaemonConfig> kClusterFields[] = {
    {"conninfo", [](DaemonConfig& c, const Entry& e) {
       cluster(c).conninfo = e.string("a libpq connection string");
       if (cluster(c).conninfo.empty()) e.reject("a non-empty libpq connection string");
     }},
    {"node", [](DaemonConfig& c, const Entry& e) {
       std::string node = e.string("a node name");
       if (node.empty() || node.size() > 200) e.reject("a node name of 1 to 200 characters");
       cluster(c).node = std::move(node);
     }},
    {"claim_batch", [](DaemonConfig& c, const Entry& e) { cluster(c).claim_batch = e.count(1, 10'000); }},
    {"claim_ahead", [](DaemonConfig& c, const Entry& e) { cluster(c).claim_ahead = e.count(0, 10'000); }},
    {"heartbeat_ms", [](DaemonConfig& c, const Entry& e) { cluster(c).heartbeat = e.ms(10); }},
    {"lease_ms", [](DaemonConfig& c, const Entry& e) { cluster(c).lease = e.ms(50); }},
    {"poll_ms", [](DaemonConfig& c, const Entry& e) { cluster(c).poll = e.ms(1); }},
    {"kinds", set_kinds},
    {"statement_timeout_ms", [](DaemonConfig& c, const Entry& e) { cluster(c).statement_timeout = e.ms(1); }},
    {"lock_timeout_ms", [](DaemonConfig& c, const Entry& e) { cluster(c).lock_timeout = e.ms(1); }},
    {"idle_in_transaction_timeout_ms",
     [](DaemonConfig& c, const Entry& e) { cluster(c).idle_in_transaction_timeout = e.ms(1); }},
};

}  // namespace

void read_cluster(DaemonConfig& config, const Entry& entry) {
  cluster(config);  // an empty [cluster] table is still a cluster (and lacks its conninfo)
  read_fields<DaemonConfig>(config, entry, kClusterFields);
}

void validate_cluster(const DaemonConfig& config) {
  if (!config.cluster) return;
  const ClusterConfig& c = *config.cluster;
  if (c.conninfo.empty()) throw ConfigError{"cluster.conninfo", "is required in [cluster]"};
  if (c.lease <= c.heartbeat) {
    throw ConfigError{"cluster.lease_ms",
                      fmt::format("must be longer than cluster.heartbeat_ms ({} ms), got {} ms",
                                  c.heartbeat.count(), c.lease.count())};
  }
  check_at_least("cluster.claim_batch", c.claim_batch, 1);
  // Every job a node holds must fit its local queue, or the queue would refuse a claimed job.
  const std::size_t room = config.runtime.capacity > config.runtime.workers
                               ? config.runtime.capacity - config.runtime.workers
                               : 0;
  if (c.claim_ahead && *c.claim_ahead > room) {
    throw ConfigError{"cluster.claim_ahead",
                      fmt::format("must leave every held job room in the local queue: at most "
                                  "runtime.capacity − runtime.workers ({}), got {}",
                                  room, *c.claim_ahead)};
  }
  for (const std::string& kind : c.kinds) {
    if (kind.empty()) throw ConfigError{"cluster.kinds", "a kind name must not be empty"};
  }
}

}  // namespace sandglass::daemon::config
