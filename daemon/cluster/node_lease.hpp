// node_lease.hpp (private) — a cluster node's own lease as the node knows it: which incarnation
// it is (the owner its rows carry) and when a beat of that incarnation was last answered
// "alive" (migrations/functions.sql, sandglass_beat). The database may judge the node lost once
// its row has been silent for a lease; the node cannot see the database's clock, so it counts
// from when it sent the last acknowledged beat (the row's beat is no earlier) and stops starting
// work a margin before the lease ends: a job never starts after the node may have lost it.
//
//   NodeLease lease{{.lease = 2s, .margin = 500ms}};
//   lease.begin("n1/3f2a", sent);        // a new incarnation's row was written
//   lease.acknowledged(sent);            // a beat sent at `sent` was answered alive
//   if (!lease.wait_fresh(ctx)) throw;   // a worker about to start a job; Blocks
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_context.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace sandglass::daemon::cluster {

class NodeLease {
 public:
  struct Options {
    Duration lease{};   // [cluster] lease_ms
    Duration margin{};  // how long before the lease ends the node stops starting work
  };
  explicit NodeLease(Options options) noexcept : options_{options} {}

  // The node is incarnation `owner` now; its row was written by a statement sent at `sent`.
  void begin(std::string owner, TimePoint sent);
  // The incarnation lost its lease: not fresh until the next begin().
  void end();
  std::string owner() const;
  // Which incarnation the node is, as one reading: the owner and the epoch, a number that
  // changes at every begin() and end(). A claim remembers the epoch it was made in; a claimed
  // job whose epoch is no longer current belongs to a lost incarnation and must not run.
  struct Incarnation {
    std::string owner;
    std::uint64_t epoch = 0;
  };
  Incarnation incarnation() const;
  std::uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }
  // A beat sent at `sent` was answered alive.
  void acknowledged(TimePoint sent);
  // True while the last acknowledged beat was sent less than lease - margin before `now`.
  bool fresh(TimePoint now) const;
  // Blocks until the lease is fresh (true) or the job of `ctx` is cancelled (false): a job does
  // not start while its node may have lost it; a beat acknowledged, or the node's loss (which
  // cancels every job it holds), ends the wait.
  bool wait_fresh(const JobContext& ctx);

 private:
  bool fresh_locked(TimePoint now) const;  // under mu_

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // acknowledged and begin wake wait_fresh
  std::string owner_;           // guarded by mu_
  TimePoint acknowledged_{};    // guarded by mu_: when the last beat answered alive was sent
  // Written under mu_ (release), read without it by epoch() (acquire): a reader that sees a
  // new epoch sees the end() or begin() that made it.
  std::atomic<std::uint64_t> epoch_{0};
};

}  // namespace sandglass::daemon::cluster
