// A complete application embedding actor-worker: a shop whose sign-up
// commits the new user and a welcome-email job in one transaction. The
// job's handler "sends" the email, a hook observes the completion, and a
// durable follow-up (an audit entry, committed with the completion) runs
// as a job of its own. docs/embedding.md shows this file.
//
//   DATABASE_URL=postgresql://postgres@127.0.0.1:5432/shop ./shop
//
// Exit status 0 when the email was sent, the hook fired and the audit
// entry committed; 1 otherwise; 2 for a configuration error.

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "config/config.hpp" // the shop's own

// -- the jobs: typed args with a kind ------------------------------------------

struct welcome_email {
  static constexpr const char* kind = "welcome_email";
  int64_t user_id = 0;
  std::string to;
};
void to_json(nlohmann::json& j, const welcome_email& a) {
  j = {{"user_id", a.user_id}, {"to", a.to}};
}
void from_json(const nlohmann::json& j, welcome_email& a) {
  j.at("user_id").get_to(a.user_id);
  j.at("to").get_to(a.to);
}

struct audit_entry { // the follow-up of a sent welcome email
  static constexpr const char* kind = "audit_entry";
  int64_t user_id = 0;
  int64_t email_job = 0;
};
void to_json(nlohmann::json& j, const audit_entry& a) {
  j = {{"user_id", a.user_id}, {"email_job", a.email_job}};
}
void from_json(const nlohmann::json& j, audit_entry& a) {
  j.at("user_id").get_to(a.user_id);
  j.at("email_job").get_to(a.email_job);
}

int main() try {
  auto settings = shop::load_settings();

  // Configuration the way the `actor-worker` binary resolves it: a TOML
  // file if given (none here), then DATABASE_URL. An empty URL is an error.
  aw::runtime_config cfg = aw::resolve_config({});
  cfg.worker.node = "shop-web-1";
  cfg.queues[0].concurrency = 4;

  // The queue's schema, then the application's own.
  auto migrated = aw::migrate(cfg);
  std::cout << "schema at version " << migrated.to_version << "\n";
  {
    pqxx::connection conn{cfg.database.url};
    pqxx::work tx{conn};
    tx.exec("CREATE TABLE IF NOT EXISTS shop_users ("
            " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " email text NOT NULL)");
    tx.exec("CREATE TABLE IF NOT EXISTS shop_audit ("
            " email_job bigint PRIMARY KEY, user_id bigint NOT NULL,"
            " at timestamptz NOT NULL DEFAULT now())");
    tx.commit();
  }

  // The application's actor system, with the node's scheduler settings.
  caf::actor_system_config sys_cfg;
  aw::configure_actor_system(sys_cfg, cfg.scheduler);
  caf::actor_system sys{sys_cfg};

  // Handlers, a hook and a durable follow-up.
  std::atomic<int> emails_sent{0};
  std::atomic<int> completions_seen{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add<welcome_email>(
    "welcome_email", [&](const welcome_email& a, const aw::job_context& ctx) {
      // deliver(a.to) would go here. Throw to retry with backoff, throw
      // aw::terminal_error to give up, or return an aw::outcome.
      std::cout << "job " << ctx.id << ": welcome email to " << a.to << "\n";
      ++emails_sent;
    });
  reg->add<audit_entry>(
    "audit_entry", [&](const audit_entry& a, const aw::job_context&) {
      // Idempotent: a job may run again after a crash.
      pqxx::connection conn{cfg.database.url};
      pqxx::work tx{conn};
      tx.exec_params("INSERT INTO shop_audit (email_job, user_id) VALUES ($1, $2)"
                     " ON CONFLICT (email_job) DO NOTHING",
                     a.email_job, a.user_id);
      tx.commit();
    });
  reg->on_event<welcome_email>(
    "welcome_email", [&](const aw::typed_event<welcome_email>& e) {
      if (e.type == aw::event_type::completed) {
        std::cout << "hook: welcome email to " << e.args.to << " completed in "
                  << e.duration.count() << " ms\n";
        ++completions_seen;
      }
    });
  reg->on_completed_enqueue<welcome_email>(
    "welcome_email", [](const welcome_email& a, const nlohmann::json& job) {
      // Inserted in the transaction that records the completion.
      return audit_entry{a.user_id, job["id"].get<int64_t>()};
    });

  aw::runtime rt{sys, cfg, reg};

  // The business transaction: the user and the job commit together, or
  // neither does.
  int64_t user_id = 0;
  int64_t email_job = 0;
  {
    pqxx::connection conn{cfg.database.url};
    pqxx::work tx{conn};
    user_id = tx.exec_params1("INSERT INTO shop_users (email) VALUES ($1) RETURNING id",
                              settings.customer_email)[0]
                .as<int64_t>();
    aw::insert_options opts;
    opts.priority = -1; // sign-ups go first
    email_job = aw::enqueue(tx, welcome_email{user_id, settings.customer_email},
                            opts);
    tx.commit();
  }
  std::cout << "user " << user_id << " signed up; welcome email is job "
            << email_job << "\n";

  // Wait until the audit entry (the follow-up's work) is there.
  bool audited = false;
  auto deadline = std::chrono::steady_clock::now() + settings.wait;
  pqxx::connection conn{cfg.database.url};
  while (!audited && std::chrono::steady_clock::now() < deadline) {
    pqxx::nontransaction q{conn};
    audited = q.exec_params1("SELECT count(*) FROM shop_audit WHERE email_job = $1",
                             email_job)[0]
                .as<int64_t>()
              > 0;
    if (!audited)
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  // Hooks run after the commit, on their own thread: give the last one a
  // moment.
  for (int i = 0; i < 100 && completions_seen == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});

  auto stopped = rt.stop(); // drain, release, flush; no handler runs after
  std::cout << "stopped: " << stopped.released << " job(s) released, "
            << stopped.abandoned << " handler(s) abandoned\n";

  bool ok = emails_sent >= 1 && completions_seen >= 1 && audited;
  std::cout << (ok ? "OK" : "FAILED") << ": email sent " << emails_sent
            << ", completion hook " << completions_seen << ", audit entry "
            << (audited ? "committed" : "missing") << "\n";
  return ok ? 0 : 1;
} catch (const aw::config_error& e) {
  std::cerr << "configuration: " << e.what() << "\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
