// The dashboard's lists and rows: jobs and dead letters a keyset page at a
// time, one job or dead letter, failure groups and the audit log.

#include <algorithm>
#include <optional>

#include "actor_worker/app/internal/dashboard_impl.hpp"
#include "actor_worker/storage/admin_jobs.hpp"

namespace aw {

using namespace dashboard_internal;

void dashboard::impl::jobs(const httplib::Request& req,
                           httplib::Response& res) {
  auto& db = database_for(req);
  storage::dashboard_job_filter f;
  f.state = param_text(req, "state");
  if (!f.state.empty()) {
    auto& states = storage::job_states();
    if (std::find(states.begin(), states.end(), f.state) == states.end()) {
      std::string names;
      for (auto& s : states)
        names += (names.empty() ? "" : ", ") + s;
      throw bad_request(400, "state must be one of " + names);
    }
  }
  f.queue = param_text(req, "queue");
  f.kind = param_text(req, "kind");
  auto page_at = page_of(req);
  f.before = page_at.before;
  f.limit = page_at.limit;
  auto page = with_db(db, [&](pqxx::connection& c) {
    return storage::dashboard_jobs(c, f);
  });
  send_json(res, 200, page_json("jobs", page));
}

void dashboard::impl::job(const httplib::Request& req, httplib::Response& res) {
  auto& db = database_for(req);
  auto id = path_id(req);
  auto [row, dead] = with_db(db, [&](pqxx::connection& c) {
    auto r = storage::job_json(c, id);
    std::optional<std::string> d;
    if (!r)
      d = storage::dead_letter_for_job_json(c, id);
    return std::make_pair(r, d);
  });
  if (!row && !dead)
    throw bad_request(404, "no job " + std::to_string(id)
                             + in_database(db));
  send_json(res, 200,
            json{{"job", row ? json::parse(*row) : json(nullptr)},
                 {"dead_letter", dead ? json::parse(*dead) : json(nullptr)}});
}

storage::dead_letter_filter
dashboard::impl::dead_letter_filter_of(const httplib::Request& req) {
  storage::dead_letter_filter f;
  f.queue = param_text(req, "queue");
  f.kind = param_text(req, "kind");
  f.fingerprint = param_text(req, "fingerprint");
  return f;
}

void dashboard::impl::dead_letters(const httplib::Request& req,
                                   httplib::Response& res) {
  auto& db = database_for(req);
  storage::dashboard_dead_letter_filter f;
  f.match = dead_letter_filter_of(req);
  auto page_at = page_of(req);
  f.before = page_at.before;
  f.limit = page_at.limit;
  auto page = with_db(db, [&](pqxx::connection& c) {
    return storage::dashboard_dead_letters(c, f);
  });
  send_json(res, 200, page_json("dead_letters", page));
}

void dashboard::impl::dead_letter(const httplib::Request& req,
                                  httplib::Response& res) {
  auto& db = database_for(req);
  auto id = path_id(req);
  auto row = with_db(db, [&](pqxx::connection& c) {
    return storage::dead_letter_json(c, id);
  });
  if (!row)
    throw bad_request(404, "no dead letter " + std::to_string(id)
                             + in_database(db));
  send_json(res, 200, json{{"dead_letter", json::parse(*row)}});
}

void dashboard::impl::dead_letter_count(const httplib::Request& req,
                                        httplib::Response& res) {
  auto& db = database_for(req);
  auto f = dead_letter_filter_of(req);
  auto n = with_db(db, [&](pqxx::connection& c) {
    return storage::count_dead_letters(c, f);
  });
  send_json(res, 200, json{{"count", n}});
}

void dashboard::impl::failures(const httplib::Request& req,
                               httplib::Response& res) {
  auto& db = database_for(req);
  auto limit = param_int(req, "limit", 100, 1, 500);
  auto groups = with_db(db, [&](pqxx::connection& c) {
    return storage::failure_groups_json(c, limit);
  });
  send_json(res, 200, "{\"groups\":" + groups + "}");
}

void dashboard::impl::audit(const httplib::Request& req,
                            httplib::Response& res) {
  auto& db = database_for(req);
  auto at = page_of(req);
  auto page = with_db(db, [&](pqxx::connection& c) {
    return storage::audit_log_page(c, at.before, at.limit);
  });
  send_json(res, 200, page_json("entries", page));
}

} // namespace aw
