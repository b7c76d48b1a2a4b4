// The dashboard's actions, each in one transaction with its audit row:
// retry and cancel a job, pause and resume a queue, retry and purge dead
// letters (one, or all that match a filter).

#include <algorithm>

#include "actor_worker/app/internal/dashboard_impl.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/storage/admin_jobs.hpp"
#include "actor_worker/storage/admin_queues.hpp"

namespace aw {

using namespace dashboard_internal;

json dashboard::impl::body_of(const httplib::Request& req) {
  if (req.body.empty())
    return json::object();
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception&) {
    throw bad_request(400, "the body is not valid JSON");
  }
  if (!body.is_object())
    throw bad_request(400, "the body must be a JSON object");
  return body;
}

void dashboard::impl::job_retry(const httplib::Request& req,
                                httplib::Response& res) {
  auto& db = database_for(req);
  auto id = path_id(req);
  body_of(req);
  act(req, res, db, "job.retry", json{{"job_id", id}},
      [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
        auto r = storage::retry_job(tx, id, defaults::notify_channel);
        const auto& was = r.position.state;
        switch (r.result) {
          case storage::retry_result::run_now:
          case storage::retry_result::rerun:
            e.affected = 1;
            e.job_ids = {id};
            e.outcome = "retried (was " + was + ")";
            return std::make_pair(
              200, json{{"id", id}, {"state", "available"}, {"was", was}});
          case storage::retry_result::refused:
            e.outcome = "refused: the job is " + was;
            return std::make_pair(
              409, json{{"error", "job " + std::to_string(id) + " is " + was
                                    + ": it cannot be retried now"},
                        {"state", was}});
          case storage::retry_result::not_found:
          default:
            e.outcome = "not found";
            return std::make_pair(
              404, json{{"error", "no job " + std::to_string(id)
                                    + in_database(db)
                                    + " (a dead-lettered job is retried "
                                      "from its dead letter)"}});
        }
      });
}

void dashboard::impl::queue_control(const httplib::Request& req,
                                    httplib::Response& res,
                                    bool pause) {
  auto& db = database_for(req);
  auto body = body_of(req);
  auto q = body.find("queue");
  if (q == body.end() || !q->is_string() || q->get<std::string>().empty())
    throw bad_request(400, "give the queue: {\"queue\": \"NAME\"}");
  auto queue = q->get<std::string>();
  // A queue's controls live in its database: pausing it in another would
  // stop nothing.
  auto& home = cfg.database_of(queue);
  if (home != db.name)
    throw bad_request(400, "queue '" + queue + "' lives in database '"
                             + home + "', not '" + db.name
                             + "': give database=" + home
                             + " (nothing changed)");
  act(req, res, db, pause ? "queue.pause" : "queue.resume",
      json{{"queue", queue}},
      [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
        bool served = std::any_of(
          db.part.queues.begin(), db.part.queues.end(),
          [&](const queue_config& c) { return c.name == queue; });
        if (!served && !storage::queue_known(tx, queue)) {
          e.outcome = "refused: unknown queue";
          return std::make_pair(
            404, json{{"error", "unknown queue '" + queue
                                  + "': no worker serves it and no job "
                                    "has it (nothing changed)"}});
        }
        if (pause) {
          auto since = storage::pause_queue(tx, queue);
          e.outcome = "paused";
          return std::make_pair(
            200, json{{"queue", queue}, {"paused", true},
                      {"paused_at", since}});
        }
        bool was = storage::resume_queue(tx, queue);
        e.outcome = was ? "resumed" : "was not paused";
        return std::make_pair(
          200, json{{"queue", queue}, {"paused", false}, {"was_paused", was}});
      });
}

void dashboard::impl::queue_pause(const httplib::Request& req,
                                  httplib::Response& res) {
  queue_control(req, res, true);
}

void dashboard::impl::queue_resume(const httplib::Request& req,
                                   httplib::Response& res) {
  queue_control(req, res, false);
}

void dashboard::impl::job_cancel(const httplib::Request& req,
                                 httplib::Response& res) {
  auto& db = database_for(req);
  auto id = path_id(req);
  body_of(req);
  act(req, res, db, "job.cancel", json{{"job_id", id}},
      [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
        auto r = storage::cancel_job(tx, id, defaults::notify_channel,
                                     defaults::cancel_channel);
        const auto& state = r.position.state;
        switch (r.result) {
          case storage::cancel_result::cancelled:
            e.affected = 1;
            e.job_ids = {id};
            e.outcome = "cancelled";
            return std::make_pair(
              200, json{{"id", id}, {"state", "cancelled"}});
          case storage::cancel_result::requested:
            e.affected = 1;
            e.job_ids = {id};
            e.outcome = "cancel requested (running on "
                        + r.position.locked_by + ")";
            return std::make_pair(
              202, json{{"id", id},
                        {"state", state},
                        {"cancel_requested", true},
                        {"locked_by", r.position.locked_by}});
          case storage::cancel_result::finished:
            e.outcome = "refused: the job is " + state;
            return std::make_pair(
              409, json{{"error", "job " + std::to_string(id)
                                    + " already finished (" + state + ")"},
                        {"state", state}});
          case storage::cancel_result::not_found:
          default:
            e.outcome = "not found";
            return std::make_pair(
              404, json{{"error", "no job " + std::to_string(id)
                                    + in_database(db)}});
        }
      });
}

void dashboard::impl::retry_dead_letters(const httplib::Request& req,
                                         httplib::Response& res,
                                         database_state& db,
                                         const storage::dead_letter_filter& f,
                                         const json& target) {
  act(req, res, db, "dead_letter.retry", target,
      [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
        auto moved = storage::retry_dead_letters(tx, f);
        e.affected = static_cast<int64_t>(moved.size());
        json jobs = json::array();
        for (auto& m : moved) {
          if (e.job_ids.size() < 1000)
            e.job_ids.push_back(m.job_id);
          if (jobs.size() < 100)
            jobs.push_back({{"dead_letter_id", m.dead_letter_id},
                            {"original_job_id", m.original_job_id},
                            {"job_id", m.job_id}});
        }
        e.outcome = "retried " + std::to_string(moved.size())
                    + " dead letter(s)";
        if (f.id != 0 && moved.empty()) {
          e.outcome = "not found";
          return std::make_pair(
            404, json{{"error", "no dead letter " + std::to_string(f.id)
                                  + in_database(db)}});
        }
        return std::make_pair(
          200, json{{"retried", moved.size()}, {"jobs", std::move(jobs)}});
      });
}

void dashboard::impl::purge_dead_letters(const httplib::Request& req,
                                         httplib::Response& res,
                                         database_state& db,
                                         const storage::dead_letter_filter& f,
                                         const json& target) {
  act(req, res, db, "dead_letter.purge", target,
      [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
        auto r = storage::purge_dead_letters(tx, f);
        e.affected = r.purged;
        e.job_ids = r.job_ids;
        e.outcome = "purged " + std::to_string(r.purged)
                    + " dead letter(s)";
        if (f.id != 0 && r.purged == 0) {
          e.outcome = "not found";
          return std::make_pair(
            404, json{{"error", "no dead letter " + std::to_string(f.id)
                                  + in_database(db)}});
        }
        return std::make_pair(200, json{{"purged", r.purged}});
      });
}

void dashboard::impl::dead_letter_retry(const httplib::Request& req,
                                        httplib::Response& res) {
  auto& db = database_for(req);
  storage::dead_letter_filter f;
  f.id = path_id(req);
  body_of(req);
  retry_dead_letters(req, res, db, f, json{{"dead_letter_id", f.id}});
}

void dashboard::impl::dead_letter_purge(const httplib::Request& req,
                                        httplib::Response& res) {
  auto& db = database_for(req);
  storage::dead_letter_filter f;
  f.id = path_id(req);
  body_of(req);
  purge_dead_letters(req, res, db, f, json{{"dead_letter_id", f.id}});
}

std::pair<storage::dead_letter_filter, json>
dashboard::impl::bulk_filter(const httplib::Request& req) {
  auto body = body_of(req);
  storage::dead_letter_filter f;
  json target = json::object();
  bool all = false;
  for (auto& [key, value] : body.items()) {
    if (key == "all") {
      if (!value.is_boolean())
        throw bad_request(400, "\"all\" must be true or false");
      all = value.get<bool>();
      continue;
    }
    std::string* field = key == "queue"         ? &f.queue
                         : key == "kind"        ? &f.kind
                         : key == "fingerprint" ? &f.fingerprint
                                                : nullptr;
    if (field == nullptr)
      throw bad_request(400, "unknown key \"" + key
                               + "\" (allowed: queue, kind, fingerprint, "
                                 "all)");
    if (!value.is_string() || value.get<std::string>().size() > 1000)
      throw bad_request(400, "\"" + key + "\" must be a string");
    *field = value.get<std::string>();
    if (!field->empty())
      target[key] = *field;
  }
  if (target.empty() && !all)
    throw bad_request(400, "give a filter (queue, kind, fingerprint), or "
                           "{\"all\": true} to act on every dead letter");
  if (target.empty())
    target["all"] = true;
  return {f, target};
}

void dashboard::impl::dead_letters_retry(const httplib::Request& req,
                                         httplib::Response& res) {
  auto& db = database_for(req);
  auto [f, target] = bulk_filter(req);
  retry_dead_letters(req, res, db, f, target);
}

void dashboard::impl::dead_letters_purge(const httplib::Request& req,
                                         httplib::Response& res) {
  auto& db = database_for(req);
  auto [f, target] = bulk_filter(req);
  purge_dead_letters(req, res, db, f, target);
}

} // namespace aw
