#include "daemon/kinds/sql/sql_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <mutex>
#include <tuple>
#include <vector>

namespace sandglass::daemon {
namespace {

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

prometheus::Histogram::BucketBoundaries buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    300};
}

}  // namespace

struct SqlMetrics::Families {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Histogram>& pool_wait =
      prometheus::BuildHistogram().Name("sandglass_sql_pool_wait_seconds")
          .Help("Time sql jobs waited for a pooled connection or a free slot").Register(registry);
  prometheus::Family<prometheus::Histogram>& statement =
      prometheus::BuildHistogram().Name("sandglass_sql_statement_seconds")
          .Help("Time from sending a statement to its end, COMMIT included").Register(registry);
  prometheus::Family<prometheus::Counter>& cancels =
      prometheus::BuildCounter().Name("sandglass_sql_cancel_requests_total")
          .Help("Statements for which a cancel request was sent to the database server").Register(registry);
  prometheus::Family<prometheus::Counter>& timeouts =
      prometheus::BuildCounter().Name("sandglass_sql_statement_timeouts_total")
          .Help("Statements the server ended at their statement_timeout").Register(registry);
  prometheus::Family<prometheus::Counter>& connect_failures =
      prometheus::BuildCounter().Name("sandglass_sql_connect_failures_total")
          .Help("Connections that could not be opened").Register(registry);
  prometheus::Family<prometheus::Gauge>& size =
      prometheus::BuildGauge().Name("sandglass_sql_pool_size")
          .Help("The most connections the pool opens (pool_size)").Register(registry);
  prometheus::Family<prometheus::Gauge>& connections =
      prometheus::BuildGauge().Name("sandglass_sql_pool_connections")
          .Help("Connections open or being opened").Register(registry);
  prometheus::Family<prometheus::Gauge>& in_use =
      prometheus::BuildGauge().Name("sandglass_sql_pool_in_use")
          .Help("Connections or slots leased by running jobs").Register(registry);
  std::mutex mu;
  // The gauges of each pool; guarded by mu.
  std::vector<std::tuple<const SqlPool*, prometheus::Gauge*, prometheus::Gauge*>> pools;
};

SqlMetrics::SqlMetrics() : families_{std::make_unique<Families>()} {}
SqlMetrics::~SqlMetrics() = default;

void SqlMetrics::watch_pool(const std::string& database, const SqlPool& pool) {
  Families& f = *families_;
  const prometheus::Labels labels{{"database", database}};
  f.pool_wait.Add(labels, buckets());
  f.statement.Add(labels, buckets());
  f.cancels.Add(labels);
  f.timeouts.Add(labels);
  f.connect_failures.Add(labels);
  f.size.Add(labels).Set(static_cast<double>(pool.size()));
  const std::lock_guard lock{f.mu};
  f.pools.emplace_back(&pool, &f.connections.Add(labels), &f.in_use.Add(labels));
}

void SqlMetrics::pool_wait(const std::string& database, Duration waited) {
  families_->pool_wait.Add({{"database", database}}, buckets()).Observe(seconds(waited));
}

void SqlMetrics::statement(const std::string& database, Duration took) {
  families_->statement.Add({{"database", database}}, buckets()).Observe(seconds(took));
}

void SqlMetrics::cancel_sent(const std::string& database) {
  families_->cancels.Add({{"database", database}}).Increment();
}

void SqlMetrics::statement_timeout(const std::string& database) {
  families_->timeouts.Add({{"database", database}}).Increment();
}

void SqlMetrics::connect_failed(const std::string& database) {
  families_->connect_failures.Add({{"database", database}}).Increment();
}

std::string SqlMetrics::render() {
  Families& f = *families_;
  {
    const std::lock_guard lock{f.mu};
    for (auto& [pool, connections, in_use] : f.pools) {
      connections->Set(static_cast<double>(pool->open()));
      in_use->Set(static_cast<double>(pool->in_use()));
    }
  }
  return prometheus::TextSerializer{}.Serialize(f.registry.Collect());
}

}  // namespace sandglass::daemon
