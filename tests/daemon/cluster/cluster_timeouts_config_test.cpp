// The [cluster] session timeouts: defaults, each key read, and errors naming the dotted key.
#include <sandglass/daemon/daemon_config.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using sandglass::daemon::ConfigError;
using sandglass::daemon::parse_config;
using std::chrono::milliseconds;

TEST_SUITE("cluster config") {

TEST_CASE("every node session has a statement, a lock and an idle-in-transaction timeout") {
  const auto d = parse_config("[cluster]\nconninfo = \"dbname=q\"\n");
  CHECK(d.cluster->statement_timeout == milliseconds{10'000});
  CHECK(d.cluster->lock_timeout == milliseconds{2'000});
  CHECK(d.cluster->idle_in_transaction_timeout == milliseconds{10'000});
  const auto c = parse_config(
      "[cluster]\nconninfo = \"dbname=q\"\nstatement_timeout_ms = 4000\nlock_timeout_ms = 250\n"
      "idle_in_transaction_timeout_ms = 6000\n");
  CHECK(c.cluster->statement_timeout == milliseconds{4'000});
  CHECK(c.cluster->lock_timeout == milliseconds{250});
  CHECK(c.cluster->idle_in_transaction_timeout == milliseconds{6'000});
}

TEST_CASE("a timeout below 1 ms is an error naming its key") {
  const std::vector<std::string> keys{"statement_timeout_ms", "lock_timeout_ms",
                                      "idle_in_transaction_timeout_ms"};
  for (const std::string& key : keys) {
    CAPTURE(key);
    std::string named;
    try {
      parse_config("[cluster]\nconninfo = \"dbname=q\"\n" + key + " = 0\n").validate();
    } catch (const ConfigError& e) {
      named = e.key();
    }
    CHECK(named == "cluster." + key);
  }
}

}  // TEST_SUITE
