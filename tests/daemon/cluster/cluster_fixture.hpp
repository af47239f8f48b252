// cluster_fixture.hpp — a real PostgreSQL (postgres_server.hpp) and real sandglassd nodes in
// cluster mode on loopback ephemeral ports, for the cluster tests.
//
//   ClusterFixture c;
//   DaemonProcess& a = c.node({"sleep"});          // claims only sleep jobs
//   HttpAnswer r = post_job(a.port(), R"({"kind":"sleep","args":{"ms":5}})");
#pragma once

#include "daemon_test_support.hpp"
#include "postgres_server.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sandglass::testing {

inline constexpr int kLeaseMs = 500;
inline constexpr int kHeartbeatMs = 50;

class ClusterFixture {
 public:
  // The [cluster] table of a node serving `kinds` (all when empty); `runtime` adds lines to its
  // [runtime] table (or tables after it), `cluster` to its [cluster] table. Unless `runtime`
  // has an [admission] table, the standing-queue rule is held off (a fixed target of a
  // minute): its adaptive target, two mean runs, is passed by any scene that keeps long jobs
  // queued for an interval, and only cluster_standing_queue_*_test.cpp test the rule.
  std::string config(const std::vector<std::string>& kinds, int workers = 2,
                     const std::string& runtime = {}, const std::string& cluster = {}) const {
    std::string list;
    for (const std::string& k : kinds) list += (list.empty() ? "\"" : ", \"") + k + "\"";
    const std::string admission = runtime.find("[admission]") == std::string::npos
                                      ? "[admission]\nqueue_delay_target_ms = 60000\n"
                                      : "";
    return fmt::format(R"([runtime]
workers = {}
{}
{}
[cluster]
conninfo = "{}"
heartbeat_ms = {}
lease_ms = {}
poll_ms = 100
kinds = [{}]
{}
)",
                       workers, runtime, admission, pg.conninfo(), kHeartbeatMs, kLeaseMs, list, cluster);
  }

  // Starts a node; its name is "HOST:PORT" (name_of).
  DaemonProcess& node(const std::vector<std::string>& kinds, int workers = 2,
                      const std::string& runtime = {}, const std::string& cluster = {}) {
    const std::string path = write_temp_file("cluster.toml", config(kinds, workers, runtime, cluster));
    nodes.push_back(std::make_unique<DaemonProcess>(std::vector<std::string>{"--config", path}));
    return *nodes.back();
  }

  // Starts a node as node() does, whose database connections go to `db_port` on 127.0.0.1
  // instead (a TcpProxy in front of the server).
  DaemonProcess& node_through(std::uint16_t db_port, const std::vector<std::string>& kinds,
                              int workers = 2) {
    std::string text = config(kinds, workers);
    const std::string direct = "port=" + std::to_string(pg.port());
    text.replace(text.find(direct), direct.size(), "port=" + std::to_string(db_port));
    nodes.push_back(std::make_unique<DaemonProcess>(
        std::vector<std::string>{"--config", write_temp_file("cluster.toml", text)}));
    return *nodes.back();
  }

  // A node's default name: this host's name and the node's bound port.
  static std::string name_of(const DaemonProcess& d) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string{host} + ":" + std::to_string(d.port());
  }

  // The node (still in `nodes`) whose name is `name`; nullptr if none.
  DaemonProcess* by_name(const std::string& name) {
    for (auto& n : nodes) {
      if (n && name_of(*n) == name) return n.get();
    }
    return nullptr;
  }

  // Has the database log every change of a job to its outcome in the table outcome_log (id,
  // attempt, reason): a job written twice shows twice.
  void log_outcomes() {
    pg.execute(
        "CREATE TABLE outcome_log (id bigint, attempt int, reason text);"
        "CREATE FUNCTION log_outcome() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        "  INSERT INTO outcome_log VALUES (NEW.id, NEW.attempt, NEW.reason); RETURN NEW; END $$;"
        "CREATE TRIGGER outcome_log AFTER UPDATE ON sandglass_jobs FOR EACH ROW"
        "  WHEN (OLD.state <> 'done' AND NEW.state = 'done') EXECUTE FUNCTION log_outcome();");
  }

  PostgresServer pg;
  std::vector<std::unique_ptr<DaemonProcess>> nodes;
};

// POST /v1/jobs?wait=false on `port`; the job's id (the request must be accepted).
inline std::uint64_t submit_later(std::uint16_t port, const std::string& body) {
  const HttpAnswer a = post_job(port, body, {}, "?wait=false");
  INFO("submitted ", body, ", answered ", a.body);
  REQUIRE(a.status == 202);
  return id_of(a);
}

// GET /v1/jobs/ID on `port` as JSON (the request must succeed).
inline boost::json::object record(std::uint16_t port, std::uint64_t id) {
  const HttpAnswer a = http(port, "GET", "/v1/jobs/" + std::to_string(id));
  if (a.status != 200) throw std::runtime_error{"GET /v1/jobs/" + std::to_string(id) + ": " + a.body};
  return json_of(a);
}

inline std::string text(const boost::json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string{v->as_string()} : std::string{};
}

}  // namespace sandglass::testing
