#include "cli/answers.hpp"

#include "cli/render.hpp"

#include <boost/json/parse.hpp>

#include <cstdio>
#include <iostream>

namespace sandglass::cli {

std::optional<boost::json::object> answer_object(const DaemonReply& reply) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(reply.body, ec);
  if (ec || !v.is_object()) {
    std::cerr << "sandglass: the daemon answered " << reply.status
              << " with a body that is not a JSON object: " << reply.body.substr(0, 200) << "\n";
    return std::nullopt;
  }
  return std::move(v.get_object());
}

ExitCode show_error(const DaemonReply& reply, const boost::json::object& body) {
  std::string message = "the daemon answered " + std::to_string(reply.status);
  if (const auto* error = body.if_contains("error"); error != nullptr && error->is_string()) {
    message = std::string{error->get_string()};
    if (const auto* f = body.if_contains("field"); f != nullptr && f->is_string()) {
      message = std::string{f->get_string()} + ": " + message;
    }
  }
  std::cerr << "sandglass: " << message << " (HTTP " << reply.status << ")\n";
  return reply.status >= 400 && reply.status < 500 ? ExitCode::usage : ExitCode::failed;
}

ExitCode show_job_answer(const DaemonReply& reply, bool json, bool waited) {
  const auto body = answer_object(reply);
  if (!body) return ExitCode::failed;
  if (!body->contains("state")) return show_error(reply, *body);
  if (json) {
    std::cout << reply.body << "\n";
  } else {
    std::cout << render_record(*body);
  }
  return exit_code_of(*body, waited);
}

ExitCode show_answer(const DaemonReply& reply, bool json,
                     const std::function<std::string(const boost::json::object&)>& render) {
  const auto body = answer_object(reply);
  if (!body) return ExitCode::failed;
  if (reply.status != 200) return show_error(reply, *body);
  if (json) {
    std::cout << reply.body << "\n";
  } else {
    std::cout << render(*body);
  }
  return ExitCode::completed;
}

}  // namespace sandglass::cli
