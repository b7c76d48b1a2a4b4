// `actor-worker enqueue`, and the CLI's duration flags.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/storage/enqueue.hpp"

namespace aw::cli {

/// A CLI duration: a bare number means seconds ("30"), else "500ms", "2m".
std::chrono::milliseconds seconds_or_duration(const char* flag,
                                              const std::string& text) {
  try {
    bool bare = text.find_first_not_of("0123456789.") == std::string::npos;
    return aw::parse_duration(bare ? text + "s" : text);
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string{flag} + ": " + e.what());
  }
}

int enqueue_job(const runtime_config& cfg, const enqueue_options& o) {
  nlohmann::json args;
  try {
    args = nlohmann::json::parse(o.args);
  } catch (const std::exception& e) {
    throw usage_error("ARGS_JSON for kind '" + o.kind
                      + "' is not valid JSON: " + e.what());
  }
  aw::insert_options opts;
  opts.queue = o.queue;
  opts.priority = o.priority;
  if (o.max_attempts != 0)
    opts.max_attempts = o.max_attempts;
  if (!o.delay.empty())
    opts.delay = seconds_or_duration("--delay", o.delay);
  if (!o.deadline.empty())
    opts.deadline = seconds_or_duration("--deadline", o.deadline);
  if (o.unique)
    opts.unique = aw::unique_options{};
  if (!o.ordering_key.empty())
    opts.ordering_key = o.ordering_key;
  // Bad input is a usage error, found before any connection is opened.
  try {
    aw::check_enqueue(o.kind, args, opts);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  pqxx::connection conn{cfg.database.url};
  pqxx::work tx{conn};
  auto id = aw::enqueue(tx, o.kind, args, opts);
  tx.commit();
  std::cout << id << std::endl;
  return exit_ok;
}

} // namespace aw::cli
