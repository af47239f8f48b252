#include "cli/commands.hpp"

#include "cli/answers.hpp"
#include "cli/batch_file.hpp"
#include "cli/daemon_client.hpp"
#include "cli/daemon_url.hpp"
#include "cli/duration_arg.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "cli/watch.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <variant>

namespace sandglass::cli {
namespace {

constexpr std::string_view kExitCodes = R"(Exit codes:
  0  completed (or not ended yet, when shown without waiting)
  1  failed
  2  usage: bad flags, or a request the daemon refused (its message on stderr)
  3  rejected at admission
  4  deadline: expired, or cut by its deadline (or still running when a wait ended)
  5  cancelled for another cause (a cancel, the client gone, shutdown)
  6  the daemon cannot be reached (message on stderr)
submit-batch: 0 every job admitted, 3 any rejected at admission, 2 a bad file or
  batch (the daemon's 400 names jobs[i].field) or an idempotency key's conflict.

Environment: SANDGLASS_URL (the daemon, when --url is not given),
             SANDGLASS_TOKEN (its bearer token).
)";

// A usage error found after CLI11's parse (a value CLI11 cannot check by itself).
struct UsageError {
  std::string message;
};

int exit_with(ExitCode code) { return static_cast<int>(code); }

std::chrono::milliseconds duration_flag(std::string_view flag, const std::string& text) {
  const auto d = parse_duration(text);
  if (!d) throw UsageError{duration_error(flag, text)};
  return *d;
}

// A query value: unreserved characters as they are, everything else percent-encoded.
std::string percent_encoded(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

struct SubmitFlags {
  std::string kind;
  std::string args;
  std::string budget;
  std::string priority;
  std::string key;
  std::int64_t expected_ms = 0;
  std::string delay;
  std::int64_t retry = 0;
  bool wait = false;
};

// The POST /v1/jobs body: only the fields whose flags were given.
std::string submit_body(const SubmitFlags& f, const CLI::App& submit) {
  boost::json::object body{{"kind", f.kind}};
  if (submit.count("--args") > 0) {
    boost::system::error_code ec;
    boost::json::value args = boost::json::parse(f.args, ec);
    if (ec) throw UsageError{"--args: is not valid JSON: " + ec.message()};
    if (!args.is_object()) throw UsageError{"--args: must be a JSON object, e.g. '{\"ms\":100}'"};
    body["args"] = std::move(args);
  }
  if (submit.count("--budget") > 0)
    body["timeout_ms"] = duration_flag("--budget", f.budget).count();
  if (submit.count("--priority") > 0) body["priority"] = f.priority;
  if (submit.count("--key") > 0) body["idempotency_key"] = f.key;
  if (submit.count("--expected-ms") > 0) body["expected_ms"] = f.expected_ms;
  if (submit.count("--delay") > 0) body["delay_ms"] = duration_flag("--delay", f.delay).count();
  if (submit.count("--retry") > 0) body["retry"] = {{"max_attempts", f.retry}};
  return boost::json::serialize(body);
}

std::string job_path(std::uint64_t id) { return "/v1/jobs/" + std::to_string(id); }

// DELETE, then (when the job has not ended within the daemon's short wait) the record once it
// has ended, by a GET that waits.
ExitCode cancel_job(const DaemonClient& client, std::uint64_t id, bool json) {
  const DaemonReply reply =
      client.request("DELETE", job_path(id), {}, DaemonClient::Wait::short_answer);
  const auto body = answer_object(reply);
  if (!body) return ExitCode::failed;
  if (!body->contains("state")) return show_error(reply, *body);
  if (!not_ended(*body)) return show_job_answer(reply, json, true);  // or it had ended before
  return show_job_answer(
      client.request("GET", job_path(id) + "?wait=true", {}, DaemonClient::Wait::until_job_ends),
      json, true);
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"sandglass: the command-line client of sandglassd, the deadline-aware job daemon",
               "sandglass"};
  app.footer(std::string{kExitCodes});
  app.require_subcommand(1);
  std::string url_text{kDefaultUrl};
  bool json = false;
  app.add_option("--url", url_text, "the daemon's URL")
      ->envname("SANDGLASS_URL")
      ->capture_default_str();
  app.add_flag("--json", json, "print the daemon's JSON as it came");

  SubmitFlags f;
  CLI::App* submit =
      app.add_subcommand("submit", "submit a job (and with --wait, wait for its outcome)");
  submit->add_option("kind", f.kind, "the job's kind (sleep, spin, exec, forward, sql, ...)")
      ->required();
  submit->add_option("--args", f.args, "the kind's args, a JSON object");
  submit->add_option("--budget", f.budget, "the job's end-to-end time budget, e.g. 500ms, 2s");
  submit->add_option("--priority", f.priority, "critical, high, normal or sheddable");
  submit->add_option("--key", f.key, "an idempotency key");
  submit->add_option("--expected-ms", f.expected_ms, "the job's own estimate of its run time");
  submit->add_option("--delay", f.delay, "start no earlier than this after arrival, e.g. 1s");
  submit->add_option("--retry", f.retry, "attempts in all, retries inside the budget");
  submit->add_flag("--wait", f.wait, "wait for the outcome (else print the id at once)");

  std::string batch_file;
  CLI::App* submit_batch = app.add_subcommand(
      "submit-batch", "submit many jobs in one request (POST /v1/jobs/batch); waits for none");
  submit_batch
      ->add_option("file", batch_file,
                   "a JSON file holding {\"jobs\": [...]} or an array of jobs; - for stdin")
      ->required();

  std::uint64_t id = 0;
  bool get_wait = false;
  CLI::App* get = app.add_subcommand("get", "show a job's record");
  get->add_option("id", id, "the job's id")->required();
  get->add_flag("--wait", get_wait,
                "wait until the job has ended (at most its deadline plus the reserve)");

  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job and show its final record");
  cancel->add_option("id", id, "the job's id")->required();

  std::string state, kind, cursor;
  std::size_t limit = 0;
  CLI::App* list = app.add_subcommand("list", "list recent jobs, newest first");
  list->add_option("--state", state,
                   "scheduled, queued, claimed (a cluster), running, completed, failed, rejected, "
                   "expired, cancelled");
  list->add_option("--kind", kind, "only jobs of this kind");
  list->add_option("--limit", limit, "at most this many (1 to 1000; default 100)");
  list->add_option("--cursor", cursor, "the next page after this cursor");

  CLI::App* stats = app.add_subcommand("stats", "show the daemon's stats snapshot");

  std::string interval = "1s";
  std::size_t count = 0;
  CLI::App* watch = app.add_subcommand("watch", "a live view of the stats (Ctrl-C stops it)");
  watch->add_option("--interval", interval, "time between refreshes, e.g. 500ms, 2s")
      ->capture_default_str();
  watch->add_option("--count", count, "stop after this many refreshes (0: never)");

  for (CLI::App* sub : {submit, submit_batch, get, cancel, list, stats, watch}) sub->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the error on stderr
    return code == 0 ? 0 : exit_with(ExitCode::usage);
  }

  try {
    const auto url = parse_daemon_url(url_text);
    if (const auto* bad = std::get_if<std::string>(&url)) throw UsageError{"--url: " + *bad};
    const char* token = std::getenv("SANDGLASS_TOKEN");
    const DaemonClient client{std::get<DaemonUrl>(url), token != nullptr ? token : ""};

    if (*submit) {
      const std::string body = submit_body(f, *submit);
      const DaemonReply reply =
          f.wait ? client.request("POST", "/v1/jobs", body, DaemonClient::Wait::until_job_ends)
                 : client.request("POST", "/v1/jobs?wait=false", body,
                                  DaemonClient::Wait::short_answer);
      return exit_with(show_job_answer(reply, json, f.wait));
    }
    if (*submit_batch) {
      const std::string body = batch_body(read_batch_file(batch_file));
      const DaemonReply reply =
          client.request("POST", "/v1/jobs/batch", body, DaemonClient::Wait::short_answer);
      const auto answer = answer_object(reply);
      if (!answer) return exit_with(ExitCode::failed);
      if (reply.status != 200) return exit_with(show_error(reply, *answer));
      std::cout << (json ? reply.body + "\n" : render_batch(*answer));
      return exit_with(exit_code_of_batch(*answer));
    }
    if (*get) {
      const DaemonReply reply =
          get_wait ? client.request("GET", job_path(id) + "?wait=true", {},
                                    DaemonClient::Wait::until_job_ends)
                   : client.request("GET", job_path(id), {}, DaemonClient::Wait::short_answer);
      return exit_with(show_job_answer(reply, json, get_wait));
    }
    if (*cancel) return exit_with(cancel_job(client, id, json));
    if (*list) {
      std::string query;
      const auto add = [&](std::string_view name, const std::string& value) {
        query.append(query.empty() ? "?" : "&").append(name).append("=");
        query.append(percent_encoded(value));
      };
      if (list->count("--state") > 0) add("state", state);
      if (list->count("--kind") > 0) add("kind", kind);
      if (list->count("--limit") > 0) add("limit", std::to_string(limit));
      if (list->count("--cursor") > 0) add("cursor", cursor);
      return exit_with(show_answer(
          client.request("GET", "/v1/jobs" + query, {}, DaemonClient::Wait::short_answer), json,
          render_listing));
    }
    if (*stats) {
      return exit_with(
          show_answer(client.request("GET", "/v1/stats", {}, DaemonClient::Wait::short_answer),
                      json, render_stats));
    }
    return exit_with(watch_stats(
        client, {.interval = duration_flag("--interval", interval), .count = count, .json = json}));
  } catch (const UsageError& e) {
    std::cerr << "sandglass: " << e.message << "\n";
    return exit_with(ExitCode::usage);
  } catch (const BatchFileError& e) {
    std::cerr << "sandglass: submit-batch: " << e.what() << "\n";
    return exit_with(ExitCode::usage);
  } catch (const Unreachable& e) {
    std::cerr << "sandglass: " << e.what() << "\n";
    return exit_with(ExitCode::unreachable);
  }
}

}  // namespace sandglass::cli
