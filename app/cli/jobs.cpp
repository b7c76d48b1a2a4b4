// `actor-worker jobs list|show|cancel|retry`.

#include "actor_worker/app/cli/cli.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_dead_letters.hpp"
#include "actor_worker/storage/admin_jobs.hpp"

namespace aw::cli {

namespace {

std::string text_of(const nlohmann::json& v) {
  if (v.is_null())
    return "-";
  if (v.is_string())
    return aw::printable(v.get<std::string>());
  return v.dump();
}

/// "job 7 is not in the jobs table: ..." for an id that is not there,
/// naming its dead letter when it has one.
std::string missing_job(pqxx::connection_base& conn, int64_t id,
                        const std::string& what_now) {
  if (auto dead = aw::storage::dead_letter_for_job_json(conn, id)) {
    auto letter = nlohmann::json::parse(*dead);
    return "job " + std::to_string(id)
           + " is no longer in the jobs table: it was moved to the dead "
             "letter queue as dead letter "
           + letter["id"].dump() + " (" + what_now + ")";
  }
  return "job " + std::to_string(id)
         + " not found in the jobs table (never enqueued, or deleted after "
           "its completed retention)";
}

} // namespace

int show_job(const runtime_config& cfg, int64_t id, bool json) {
  pqxx::connection conn{cfg.database.url};
  auto row = aw::storage::job_json(conn, id);
  if (!row) {
    if (auto dead = aw::storage::dead_letter_for_job_json(conn, id)) {
      // Found, in the dead letter queue: its dead letter row (keys = the
      // columns of dead_letter_jobs) with "state": "dead_lettered".
      auto letter = nlohmann::json::parse(*dead);
      letter["state"] = "dead_lettered";
      if (!json)
        std::cerr << "job " << id
                  << " is no longer in the jobs table: it was moved to the "
                     "dead letter queue\n";
      std::cout << (json ? letter.dump() : letter.dump(2)) << std::endl;
      return exit_ok;
    } else {
      std::cerr << "job " << id
                << " not found in the jobs table (never enqueued, or deleted "
                   "after its completed retention)\n";
    }
    return exit_failure;
  }
  auto parsed = nlohmann::json::parse(*row);
  std::cout << (json ? parsed.dump() : parsed.dump(2)) << std::endl;
  return exit_ok;
}

int list_jobs(const runtime_config& cfg, const jobs_list_options& o) {
  const auto& states = aw::storage::job_states();
  if (!o.state.empty()
      && std::find(states.begin(), states.end(), o.state) == states.end()) {
    std::string known;
    for (auto& s : states)
      known += (known.empty() ? "" : ", ") + s;
    throw usage_error("--state: '" + aw::printable(o.state)
                      + "' is not a job state (states: " + known + ")");
  }
  pqxx::connection conn{cfg.database.url};
  aw::storage::job_filter filter{o.state, o.queue, o.kind, o.after, o.limit};
  auto rows = nlohmann::json::parse(aw::storage::jobs_json(conn, filter));
  if (o.json) {
    std::cout << rows.dump() << std::endl;
    return exit_ok;
  }
  if (rows.empty()) {
    std::cerr << "no jobs" << (o.after > 0 ? " after that id" : "")
              << (o.state.empty() && o.queue.empty() && o.kind.empty()
                    ? ""
                    : " match")
              << "\n";
    return exit_ok;
  }
  // A table: one line per job, whatever the job put in its names.
  const std::vector<std::string> columns = {
    "id", "state", "queue", "kind", "priority", "attempt", "run_at",
    "locked_by", "last_error_message"};
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c)
    width[c] = columns[c].size();
  for (auto& r : rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < columns.size(); ++c) {
      auto text = text_of(r[columns[c]]);
      // The last column is free text: cut it, the others stay whole.
      if (c + 1 == columns.size() && text.size() > 60)
        text = text.substr(0, 57) + "...";
      width[c] = std::max(width[c], text.size());
      line.push_back(std::move(text));
    }
    cells.push_back(std::move(line));
  }
  auto print = [&](const std::vector<std::string>& line) {
    for (size_t c = 0; c < line.size(); ++c) {
      if (c + 1 == line.size())
        std::cout << line[c];
      else
        std::cout << std::left << std::setw(static_cast<int>(width[c]) + 2)
                  << line[c];
    }
    std::cout << "\n";
  };
  std::vector<std::string> header;
  for (auto& c : columns) {
    std::string h = c;
    std::transform(h.begin(), h.end(), h.begin(), ::toupper);
    header.push_back(h);
  }
  print(header);
  for (auto& line : cells)
    print(line);
  if (static_cast<int64_t>(rows.size()) == o.limit)
    std::cerr << "(more may follow: --after " << rows.back()["id"].dump()
              << ")\n";
  return exit_ok;
}

int cancel_job(const runtime_config& cfg, int64_t id, const std::string& wait,
               bool json) {
  auto patience = wait.empty() ? std::chrono::milliseconds{10'000}
                               : seconds_or_duration("--wait", wait);
  pqxx::connection conn{cfg.database.url};
  auto report = aw::storage::cancel_job(conn, id, defaults::notify_channel,
                                        defaults::cancel_channel);
  using aw::storage::cancel_result;
  auto out = [&](const std::string& state, const std::string& text,
                 bool cancel_requested = false) {
    if (json) {
      nlohmann::json j = {{"id", id}, {"state", state}};
      if (cancel_requested)
        j["cancel_requested"] = true;
      std::cout << j.dump() << std::endl;
    } else {
      std::cout << text << std::endl;
    }
  };
  switch (report.result) {
    case cancel_result::not_found:
      std::cerr << missing_job(conn, id, "nothing to cancel") << "\n";
      return exit_failure;
    case cancel_result::finished:
      std::cerr << "job " << id << " already finished ("
                << report.position.state << "): nothing to cancel\n";
      return exit_failure;
    case cancel_result::cancelled:
      out("cancelled", "job " + std::to_string(id) + " cancelled");
      return exit_ok;
    case cancel_result::requested:
      break;
  }
  // It runs: its worker cancels the handler and records the outcome.
  auto worker = aw::printable(report.position.locked_by);
  auto deadline = std::chrono::steady_clock::now() + patience;
  std::optional<aw::storage::job_position> now = report.position;
  while (now && now->state == "running"
         && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    now = aw::storage::job_state(conn, id);
  }
  if (now && now->state == "running") {
    out("running",
        "job " + std::to_string(id) + ": cancel requested; it still runs on "
          + worker + " (its worker cancels the handler: `actor-worker jobs "
                     "show "
          + std::to_string(id) + "` shows when it ended)",
        true);
    return exit_ok;
  }
  if (now && now->state == "cancelled") {
    out("cancelled", "job " + std::to_string(id) + " cancelled (it was "
                       "running on " + worker + ")");
    return exit_ok;
  }
  // It ended otherwise: the handler completed before (or despite) the
  // cancel, or the job left the table.
  std::cerr << "job " << id << " was not cancelled: it ended "
            << (now ? now->state : std::string{"outside the jobs table"})
            << " (its handler finished before the cancel took effect, or "
               "did not stop)\n";
  if (json)
    std::cout << nlohmann::json{{"id", id},
                                {"state", now ? now->state : "gone"}}
                   .dump()
              << std::endl;
  return exit_failure;
}

int retry_job(const runtime_config& cfg, int64_t id, bool json) {
  pqxx::connection conn{cfg.database.url};
  aw::storage::retry_report report;
  try {
    report = aw::storage::retry_job(conn, id, defaults::notify_channel);
  } catch (const pqxx::unique_violation&) {
    std::cerr << "job " << id
              << " cannot run again: another job with the same unique key "
                 "is active\n";
    return exit_failure;
  }
  using aw::storage::retry_result;
  const auto& was = report.position.state;
  switch (report.result) {
    case retry_result::not_found:
      std::cerr << missing_job(conn, id, "retry it with `actor-worker dlq "
                                         "retry` and that id")
                << "\n";
      return exit_failure;
    case retry_result::refused:
      if (was == "running")
        std::cerr << "job " << id << " is running (on "
                  << aw::printable(report.position.locked_by)
                  << "): it cannot be retried until it ends (`actor-worker "
                     "jobs cancel "
                  << id << "` stops it)\n";
      else if (was == "waiting_external")
        std::cerr << "job " << id
                  << " waits for an external callback: resolve it with "
                     "`actor-worker callback retry CALLBACK_ID`\n";
      else
        std::cerr << "job " << id << " cannot be retried from state " << was
                  << "\n";
      return exit_failure;
    case retry_result::run_now:
    case retry_result::rerun:
      break;
  }
  if (json)
    std::cout << nlohmann::json{{"id", id}, {"state", "available"},
                                {"was", was}}
                   .dump()
              << std::endl;
  else
    std::cout << "job " << id
              << (report.result == retry_result::rerun
                    ? " runs again as a new attempt (was " + was + ")"
                    : " is due now (was " + was + ")")
              << std::endl;
  return exit_ok;
}

} // namespace aw::cli
