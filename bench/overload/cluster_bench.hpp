// cluster_bench.hpp — `sandglass-overload --cluster N --sandglassd PATH`: starts a PostgreSQL
// (initdb in a temporary folder, as user postgres when run as root, like the tests) and N
// sandglassd in cluster mode on loopback, and measures the cluster figures:
//
//   - enqueue -> start when idle: no-op jobs one at a time, claimed_at - created_at by the
//     database's clock (p50/p99), and the whole submit -> answer round trip seen by the client;
//   - end-to-end no-op throughput with 1..N nodes: jobs submitted without waiting from several
//     connections spread over the nodes, until every outcome is written (first insert to last
//     outcome, by the database's clock);
//   - claim latency: 8 concurrent claimers, each on its own connection, call the nodes' claim
//     statement (sandglass_claim, 8 jobs at a time) and then write the outcomes
//     (sandglass_finish) over a queue of 4 classes; every claim's round trip is recorded
//     (p50/p90/p99/max), not read from histogram buckets;
//   - overload of the N-node cluster: the HTTP mode's goodput / wasted-work sweep (capacity
//     closed loop, then --load, by default 2x/5x/10x, spread over every node) and, by the
//     database's clock afterwards, jobs claimed or started after their deadline and jobs with
//     more than one outcome write (a trigger logs every write);
//   - cancel -> observed: DELETE on one node of a job running on another, until the waiting
//     client (on a third node) has the cancelled outcome (p50/p99);
//   - recovery after kill -9: from the kill of the node running a job until another node has
//     claimed it again (attempt 2), against lease_ms.
//
// Thread safety: runs on the calling thread (and a few client threads it joins).
#pragma once

#include "options.hpp"

namespace sandglass::bench {

// Returns the process exit code: 0 when every step ran.
int run_cluster(const Options& options);

}  // namespace sandglass::bench
