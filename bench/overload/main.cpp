// sandglass-overload: the queue-overload bench. All it does is parse the command line and
// start the in-process bench, the HTTP driver or the soak (see options.hpp for the flags).
#include "cluster_bench.hpp"
#include "cluster_chaos.hpp"
#include "http_driver.hpp"
#include "in_process.hpp"
#include "options.hpp"
#include "soak.hpp"

int main(int argc, char** argv) {
  const sandglass::bench::Options options = sandglass::bench::parse_options(argc, argv);
  if (options.cluster_chaos.count() > 0) return sandglass::bench::run_cluster_chaos(options);
  if (options.cluster_nodes > 0) return sandglass::bench::run_cluster(options);
  if (options.soak.count() > 0) return sandglass::bench::run_soak(options);
  return options.target.empty() ? sandglass::bench::run_in_process(options)
                                : sandglass::bench::run_http(options);
}
