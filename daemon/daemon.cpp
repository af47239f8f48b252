#include <sandglass/daemon/daemon.hpp>

#include "daemon/api/api.hpp"
#include "daemon/http/http_server.hpp"
#include "daemon/api/job_records.hpp"
#include "daemon/cluster/cluster_node.hpp"
#include "daemon/metrics.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sandglass::daemon {

namespace {
DaemonConfig validated(DaemonConfig config) {
  config.validate();
  return config;
}

// The runtime's options with overrun reports: one warning per job that is still running
// `overrun_after` past its deadline, and a count per kind. An embedder's own callback still runs.
RuntimeOptions reporting_overruns(RuntimeOptions options, DaemonMetrics& metrics) {
  options.on_overrun = [&metrics, theirs = std::move(options.on_overrun)](const Overrun& o) {
    spdlog::warn(
        "job {} ({}) on worker {} is still running {} ms past its deadline: its handler does not "
        "stop when cancelled, and holds the worker",
        o.id, o.kind, o.worker,
        std::chrono::duration_cast<std::chrono::milliseconds>(o.past_deadline).count());
    metrics.job_overrunning(o.kind);
    if (theirs) theirs(o);
  };
  return options;
}
}  // namespace

class Daemon::Impl {
 public:
  Impl(DaemonConfig config, KindRegistry kinds)
      : config_{validated(std::move(config))},
        kinds_{std::move(kinds)},
        records_{config_.records},
        runtime_{reporting_overruns(config_.runtime, metrics_)},
        api_{config_, kinds_, runtime_, records_, metrics_, draining_},
        server_{config_.limits, config_.io_threads, api_, metrics_} {
    if (config_.cluster) {  // connects and migrates: an unreachable database fails the start
      cluster_ = std::make_unique<cluster::ClusterNode>(config_, kinds_, runtime_);
      api_.set_cluster(cluster_.get());
      cluster_->observe_runs([this](const Outcome& o) { metrics_.job_retries(o); });
    }
  }

  ~Impl() {
    if (started_) {
      drain_timeout_ = std::chrono::milliseconds{0};
      request_stop();
      wait();
    }
    // Outcome callbacks post answers to the server's io_context: no job may end after it is
    // gone. (A daemon never started has no jobs.)
    if (cluster_) cluster_->stop_claiming();
    runtime_.shutdown(Duration::zero());
    if (cluster_) cluster_->stop(Duration::zero());
  }

  void start() {
    server_.start(config_.listen_host, config_.listen_port);
    if (cluster_) cluster_->start(listen_address());
    started_ = true;
  }

  void request_stop() {
    std::lock_guard lock{mu_};
    if (stop_requested_) return;
    stop_requested_ = true;
    if (cluster_) cluster_->stop_claiming();  // claimed jobs are never refused shutting_down
    runtime_.stop_admitting();  // before /readyz turns 503: whoever sees that is refused
    draining_.store(true, std::memory_order_relaxed);
    drainer_ = std::thread{[this] { drain(); }};
    stop_cv_.notify_all();
  }

  void end_drain() {
    drain_cut_.store(true, std::memory_order_release);  // pairs with the load in drain()
    request_stop();
    runtime_.end_drain();
  }

  DrainSummary wait() {
    std::unique_lock lock{mu_};
    stop_cv_.wait(lock, [this] { return stop_requested_; });
    // Joined without the lock: end_drain (from another thread) takes it meanwhile.
    std::thread drainer = std::move(drainer_);
    lock.unlock();
    if (drainer.joinable()) drainer.join();
    return summary_;
  }

  std::string listen_address() const {
    const bool v6 = config_.listen_host.find(':') != std::string::npos;
    return (v6 ? "[" + config_.listen_host + "]" : config_.listen_host) + ":" +
           std::to_string(server_.port());
  }

  const DaemonConfig config_;
  const KindRegistry kinds_;
  std::atomic<bool> draining_{false};
  DaemonMetrics metrics_;
  JobRecords records_;
  Runtime runtime_;
  Api api_;
  HttpServer server_;
  std::unique_ptr<cluster::ClusterNode> cluster_;  // with [cluster]

 private:
  // Stop admitting, let the work finish until the drain deadline (then the runtime cancels the
  // rest), let every waiting client have its answer, then close the server.
  void drain() {
    const auto timeout = started_ ? drain_timeout_.load() : std::chrono::milliseconds{0};
    const Deadline drain_deadline = Deadline::after(timeout);
    runtime_.shutdown_until(drain_deadline);
    const bool in_time = !drain_deadline.expired() && !drain_cut_.load(std::memory_order_acquire);
    if (cluster_) cluster_->stop();  // writes the outcomes, leaves the cluster
    server_.stop_accepting();
    server_.wait_answered_until(Deadline::after(config_.limits.write_timeout).time_point());
    server_.stop();
    summary_ = {.stats = runtime_.stats(), .drained_in_time = in_time};
  }

  std::atomic<std::chrono::milliseconds> drain_timeout_{config_.drain_timeout};
  bool started_ = false;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_requested_ = false;  // guarded by mu_
  std::atomic<bool> drain_cut_{false};  // end_drain was called
  std::thread drainer_;          // guarded by mu_
  DrainSummary summary_;         // written by the drainer; read after joining it
};

Daemon::Daemon(DaemonConfig config, KindRegistry kinds)
    : impl_{std::make_unique<Impl>(std::move(config), std::move(kinds))} {}
Daemon::~Daemon() = default;
void Daemon::start() { impl_->start(); }
std::uint16_t Daemon::port() const noexcept { return impl_->server_.port(); }
std::string Daemon::listen_address() const { return impl_->listen_address(); }
void Daemon::request_stop() { impl_->request_stop(); }
void Daemon::end_drain() { impl_->end_drain(); }
bool Daemon::draining() const noexcept { return impl_->draining_.load(std::memory_order_relaxed); }
DrainSummary Daemon::wait() { return impl_->wait(); }
Runtime& Daemon::runtime() noexcept { return impl_->runtime_; }

}  // namespace sandglass::daemon
