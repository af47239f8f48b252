// sql_metrics.hpp (private) — `SqlMetrics`, the sql kind's series per database (label
// `database`, from the config's bounded set):
//
//   sandglass_sql_pool_wait_seconds{database}          histogram: waiting for a connection or
//                                                      a free slot (also waits that gave up)
//   sandglass_sql_statement_seconds{database}          histogram: from sending the statement to
//                                                      its end (COMMIT included)
//   sandglass_sql_cancel_requests_total{database}      statements that got a cancel request
//   sandglass_sql_statement_timeouts_total{database}   statements ended by statement_timeout
//   sandglass_sql_connect_failures_total{database}     connections that could not be opened
//   sandglass_sql_pool_size{database}                  gauge: the most connections (config)
//   sandglass_sql_pool_connections{database}           gauge: open or being opened
//   sandglass_sql_pool_in_use{database}                gauge: leased by running jobs
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include "daemon/kinds/sql/sql_pool.hpp"

#include <sandglass/deadline.hpp>

#include <memory>
#include <string>

namespace sandglass::daemon {

class SqlMetrics {
 public:
  SqlMetrics();
  ~SqlMetrics();

  // Makes the database's series exist from the start; gauges are read from `pool` at render
  // time, so `pool` must outlive this object's last render().
  void watch_pool(const std::string& database, const SqlPool& pool);

  void pool_wait(const std::string& database, Duration waited);
  void statement(const std::string& database, Duration took);
  void cancel_sent(const std::string& database);
  void statement_timeout(const std::string& database);
  void connect_failed(const std::string& database);

  std::string render();

 private:
  struct Families;
  std::unique_ptr<Families> families_;
};

}  // namespace sandglass::daemon
