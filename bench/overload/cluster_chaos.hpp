// cluster_chaos.hpp — `sandglass-overload --cluster 3 --cluster-chaos 3m --sandglassd PATH`:
// a PostgreSQL and the cluster's nodes (cluster_setup.hpp) under a mixed load while a fault is
// injected every ~10 s, then the counts of what the cluster promises:
//
//   - load: client threads submit and wait (POST /v1/jobs) to random live nodes: `sql` jobs
//     whose query writes one ledger row at its commit point (commits = true) and `sleep` jobs,
//     budgets 200 ms to 10 s, four classes; a quarter keyed, a keyed request retried with the
//     same key on another node after a broken connection or a 5xx without a record;
//   - faults, one at a time: kill -9 of a node (its restart once its jobs ran again), SIGSTOP of
//     a node for 2–3 leases then SIGCONT, a PostgreSQL restart (pg_ctl stop -m fast, 1–10 s
//     down, start);
//   - at the end (load stopped, every answer awaited, every row ended): faults by type; jobs
//     with more than one ledger row (past a commit point twice); rows not ended or with more
//     than one outcome write, and client answers that differ from the row's outcome; claims
//     after the deadline by the database's clock; take-backs from live nodes (a trigger logs
//     every take-back and node_lost with the owner it left, compared with the fault windows);
//     clients left waiting; recovery after each kill -9.
//
// Thread safety: runs on the calling thread (and client threads it joins).
#pragma once

#include "options.hpp"

namespace sandglass::bench {

// Returns the process exit code: 0 when every correctness count is zero, 1 otherwise or on error.
int run_cluster_chaos(const Options& options);

}  // namespace sandglass::bench
