// cluster_bench.hpp — `sandglass-overload --cluster N --sandglassd PATH`: starts a PostgreSQL
// (initdb in a temporary folder, as user postgres when run as root, like the tests) and N
// sandglassd in cluster mode on loopback, and measures the cluster figures:
//
//   - enqueue -> start when idle: no-op jobs one at a time, claimed_at - created_at by the
//     database's clock (p50/p99), and the whole submit -> answer round trip seen by the client;
//   - end-to-end no-op throughput with 1..N nodes: jobs submitted without waiting from several
//     connections spread over the nodes, until every outcome is written (first insert to last
//     outcome, by the database's clock);
//   - claim latency p50/p99 from the nodes' sandglass_cluster_claim_seconds histograms (bucket
//     bounds: an upper estimate);
//   - cancel -> observed: DELETE on one node of a job running on another, until the waiting
//     client (on a third node) has the cancelled outcome (p50/p99);
//   - recovery after kill -9: from the kill of the node running a job until another node has
//     claimed it again (attempt 2), against lease_ms.
//
// Not measured here: goodput and wasted work under 2x/5x/10x overload of the cluster.
//
// Thread safety: runs on the calling thread (and a few client threads it joins).
#pragma once

#include "options.hpp"

namespace sandglass::bench {

// Returns the process exit code: 0 when every step ran.
int run_cluster(const Options& options);

}  // namespace sandglass::bench
