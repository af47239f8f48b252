// Plots, rendered by gnuplot (Debian: gnuplot-nox) from a script written to its stdin, and
// write_outputs, which writes what --json and --plot ask for.
// `noenhanced` keeps the underscores of policy names literal.
#include "report.hpp"

#include <fmt/core.h>

#include <sys/wait.h>

#include <cstdio>
#include <algorithm>
#include <map>
#include <vector>

namespace sandglass::bench {
namespace {

std::string terminal_for(const std::string& path, int width, int height) {
  const bool svg = path.size() >= 4 && path.compare(path.size() - 4, 4, ".svg") == 0;
  return svg ? fmt::format("set terminal svg noenhanced size {},{} font 'sans,12' background 'white'\n",
                           width, height)
             : fmt::format("set terminal pngcairo noenhanced size {},{} font 'sans,10'\n", width, height);
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string{"''"} : std::string{c};
  return out + "'";
}

bool run_gnuplot(const std::string& script, std::string& error) {
  std::FILE* gp = popen("gnuplot", "w");
  if (gp == nullptr) {
    error = "cannot start gnuplot (Debian: apt-get install gnuplot-nox)";
    return false;
  }
  std::fwrite(script.data(), 1, script.size(), gp);
  const int status = pclose(gp);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = WIFEXITED(status) && WEXITSTATUS(status) == 127
                ? "gnuplot not found (Debian: apt-get install gnuplot-nox)"
                : "gnuplot failed";
    return false;
  }
  return true;
}

std::string title_of(const RunInfo& info) {
  const Options& o = *info.options;
  return fmt::format("sandglass-overload ({}): {} workers, {} body, service {}, deadline {}, "
                     "capacity {:.0f}/s, {} cores",
                     info.mode, o.workers, to_string(o.body), o.service.describe(),
                     o.deadline.describe(), info.capacity_per_s, info.machine.cores);
}

}  // namespace

bool write_plot(const std::string& path, const RunInfo& info, std::span<const PointResult> points,
                std::string& error) {
  std::vector<std::string> order;
  std::map<std::string, std::string> data;  // policy -> "load goodput wasted" lines
  double lo = points.front().load;
  double hi = lo;
  for (const PointResult& r : points) {
    lo = std::min(lo, r.load);
    hi = std::max(hi, r.load);
    if (!data.contains(r.policy)) order.push_back(r.policy);
    data[r.policy] += fmt::format("{} {} {}\n", r.load, r.goodput_ratio, r.wasted_work_ratio);
  }
  std::string script = terminal_for(path, 1100, 460);
  script += "set output " + quoted(path) + "\n";
  for (std::size_t i = 0; i < order.size(); ++i) {
    script += fmt::format("$p{} << EOD\n{}EOD\n", i, data[order[i]]);
  }
  auto plot_all = [&](int column, double goal, const char* goal_title) {
    std::string cmd = "plot ";
    for (std::size_t i = 0; i < order.size(); ++i) {
      cmd += fmt::format("$p{} using 1:{} with linespoints lw 2 pt 7 title {}, ", i, column,
                         quoted(order[i]));
    }
    return cmd + fmt::format("{} with lines dt 2 lc rgb 'gray40' title '{}'\n", goal, goal_title);
  };
  script += "set multiplot layout 1,2 title " + quoted(title_of(info)) + "\n";
  script += fmt::format("set xrange [{}:{}]\n", lo / 1.25, hi * 1.25);
  script +=
      "set logscale x\nset xtics (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)\nset grid\n"
      "set xlabel 'offered load (multiple of capacity)'\n";
  script += "set ylabel 'goodput ratio (on-time / min(offered, capacity))'\nset yrange [0:1.05]\n"
            "set key bottom left\n";
  script += plot_all(2, 0.95, "goal 0.95");
  script += "set ylabel 'wasted work ratio (busy time not on time / all)'\nset yrange [0:1.05]\n"
            "set key top left\n";
  script += plot_all(3, 0.01, "goal 0.01");
  script += "unset multiplot\n";
  return run_gnuplot(script, error);
}

bool write_spike_plot(const std::string& path, const RunInfo& info,
                      std::span<const SpikeResult> spikes, std::string& error) {
  std::string script = terminal_for(path, 1000, 420);
  script += "set output " + quoted(path) + "\n";
  for (std::size_t i = 0; i < spikes.size(); ++i) {
    std::string lines;
    for (const auto& [t, g] : spikes[i].series) lines += fmt::format("{} {}\n", t, g);
    script += fmt::format("$s{} << EOD\n{}EOD\n", i, lines);
  }
  const double phase_s = std::chrono::duration<double>{info.options->duration}.count();
  const double c = info.capacity_per_s;
  script += "set title " + quoted("spike 0.8x -> 1.4x -> 0.8x: " + title_of(info)) + "\n";
  script += "set xlabel 'time (s)'\nset ylabel 'on-time completions per second (50 ms mean)'\n"
            "set grid\nset key top right\n";
  script += fmt::format("set yrange [0:{}]\n", c * 1.6);
  // The offered rate as a step function, for reference.
  script += fmt::format("offered(x) = x < {0} ? {2} : (x < 2*{0} ? {3} : {2})\n", phase_s, 0, 0.8 * c, 1.4 * c);
  std::string cmd = "plot offered(x) with lines dt 2 lc rgb 'gray40' title 'offered', ";
  cmd += fmt::format("{} with lines dt 3 lc rgb 'gray60' title 'capacity', ", c);
  for (std::size_t i = 0; i < spikes.size(); ++i) {
    cmd += fmt::format("$s{} using 1:2 with lines lw 2 title {}{}", i,
                       quoted(spikes[i].policy), i + 1 < spikes.size() ? ", " : "\n");
  }
  script += "set samples 2000\n" + cmd;
  return run_gnuplot(script, error);
}

bool write_outputs(const RunInfo& info, std::span<const PointResult> points,
                   std::span<const SpikeResult> spikes) {
  const Options& o = *info.options;
  bool ok = true;
  std::string error;
  if (!o.json_path.empty() && !write_json(o.json_path, info, points, spikes, error)) {
    std::fprintf(stderr, "sandglass-overload: --json: %s\n", error.c_str());
    ok = false;
  }
  if (!o.plot_path.empty()) {
    if (!points.empty() && !write_plot(o.plot_path, info, points, error)) {
      std::fprintf(stderr, "sandglass-overload: --plot: %s\n", error.c_str());
      ok = false;
    }
    if (!spikes.empty() && !write_spike_plot(spike_plot_path(o.plot_path), info, spikes, error)) {
      std::fprintf(stderr, "sandglass-overload: --plot (spike): %s\n", error.c_str());
      ok = false;
    }
  }
  return ok;
}

std::string spike_plot_path(const std::string& path) {
  const auto dot = path.find_last_of('.');
  const auto slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "-spike";
  return path.substr(0, dot) + "-spike" + path.substr(dot);
}

}  // namespace sandglass::bench
