// The dashboard's storage against a real database
// (storage/dashboard_queries.hpp):
// the error fingerprint rules (migrations/011_dashboard.sql); job pages that
// list exactly what the `jobs` view holds, state by state, paged to the end
// with small scan budgets (lane and row-per-state jobs, every state);
// dead letter pages, failure groups, counts, a group's retry and purge in
// the caller's transaction, and the audit log.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/admin_dead_letters.hpp"
#include "actor_worker/storage/dashboard_queries.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;

namespace {

std::vector<int64_t> ids_of(const std::string& rows_json) {
  std::vector<int64_t> out;
  for (auto& row : nlohmann::json::parse(rows_json))
    out.push_back(row.at("id").get<int64_t>());
  return out;
}

std::vector<int64_t> column_ids(aw::test::db_session& s,
                                const std::string& sql) {
  std::vector<int64_t> out;
  for (const auto& row : s.query(sql))
    out.push_back(row[0].as<int64_t>());
  return out;
}

std::string where_of(const std::string& state, const std::string& queue,
                     const std::string& kind) {
  std::string w = "true";
  if (!state.empty())
    w += " AND state = '" + state + "'";
  if (!queue.empty())
    w += " AND queue = '" + queue + "'";
  if (!kind.empty())
    w += " AND kind = '" + kind + "'";
  return w;
}

/// Every page of `f` from the newest on; checks that no page repeats an id
/// and that every row matches the filter.
std::vector<int64_t> all_pages(pqxx::connection& conn,
                               aw::storage::dashboard_job_filter f,
                               int* pages = nullptr) {
  std::vector<int64_t> out;
  f.before = 0;
  for (int i = 0; i < 100000; ++i) {
    auto page = aw::storage::dashboard_jobs(conn, f);
    for (auto& row : nlohmann::json::parse(page.rows)) {
      if (!f.state.empty())
        BOOST_TEST(row.at("state").get<std::string>() == f.state);
      if (!f.queue.empty())
        BOOST_TEST(row.at("queue").get<std::string>() == f.queue);
      if (!f.kind.empty())
        BOOST_TEST(row.at("kind").get<std::string>() == f.kind);
      auto id = row.at("id").get<int64_t>();
      BOOST_TEST((out.empty() || id < out.back()), "ids go down");
      out.push_back(id);
    }
    if (pages != nullptr)
      ++*pages;
    if (!page.next_before)
      return out;
    BOOST_TEST((f.before == 0 || *page.next_before < f.before),
               "the next page starts lower");
    f.before = *page.next_before;
  }
  BOOST_FAIL("paging did not end");
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(dashboard_test)

BOOST_AUTO_TEST_CASE(fingerprint_rules) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  const std::vector<std::pair<std::string, std::string>> cases = {
    {"job 4711 failed: connection to 'db-1' refused after 3.5s",
     "job <n> failed: connection to <str> refused after <n>s"},
    {"job 12 failed: connection to 'db-2' refused after 1s",
     "job <n> failed: connection to <str> refused after <n>s"},
    {"can't reach \"api.example.com\" (`GET /v1/users/77`)",
     "can't reach <str> (<str>)"},
    {"user 6f1c2a3e-1b2c-4d5e-8f90-123456789ABC not found",
     "user <uuid> not found"},
    {"expired at 2026-12-01T10:09:57.495Z, now 2026-12-01 10:10:00+02:00",
     "expired at <time>, now <time>"},
    {"segfault at 0x7ffd5e8c; object 3f2a9c1b7e9d; word deadbeefcafe",
     "segfault at <hex>; object <hex>; word deadbeefcafe"},
    {"  many\n\tlines   and\r\n  spaces  ", "many lines and spaces"},
    {"<script>alert(1)</script> retry 42", "<script>alert(<n>)</script> retry <n>"},
    {"HTTP 503 from http://10.0.0.7:8080/hook",
     "HTTP <n> from http://<n>:<n>/hook"},
    {"", ""},
  };
  for (auto& [in, want] : cases) {
    auto got = s.text("SELECT actor_worker_error_fingerprint("
                      + s.conn.quote(in) + ")");
    BOOST_TEST(got == want, "fingerprint of '" << in << "'");
  }
  BOOST_TEST(s.text("SELECT coalesce(actor_worker_error_fingerprint(NULL), "
                    "'null')")
             == "");
  // At most 300 characters.
  BOOST_TEST(s.scalar("SELECT length(actor_worker_error_fingerprint("
                      "repeat('word ', 500)))")
             == 300);
  // Stored with each dead letter, whoever writes it.
  s.exec("INSERT INTO dead_letter_jobs (original_job_id, kind, queue, args, "
         "priority, attempt, error_count, last_error_message, created_at) "
         "VALUES (1, 'k', 'q', '{}', 0, 3, 3, 'order 99 rejected', now())");
  BOOST_TEST(s.text("SELECT fingerprint FROM dead_letter_jobs")
             == "order <n> rejected");
}

BOOST_AUTO_TEST_CASE(job_pages_list_exactly_what_the_jobs_view_holds) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Lane jobs in two queues and two kinds.
  s.exec("INSERT INTO jobs_in (kind, queue) SELECT CASE WHEN i % 3 = 0 THEN 'x' "
         "ELSE 'y' END, 'a' FROM generate_series(1, 400) AS i");
  s.exec("INSERT INTO jobs_in (kind, queue) SELECT CASE WHEN i % 2 = 0 THEN 'x' "
         "ELSE 'y' END, 'b' FROM generate_series(1, 150) AS i");
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  opts.completed_retention = 1h;
  // The lane shapes below need lane claims: the commit-order fence is
  // cluster-wide, and another suite's transaction held past the runtime's
  // 200 ms (a CREATE DATABASE) would send them down the row-per-state path.
  aw::storage::job_store store{opts};
  // Queue a: 300 claimed in batches, 240 of them completed (lane
  // completed), 60 left running; 100 still available on the lane.
  std::vector<aw::claimed_job> claimed;
  for (int i = 0; i < 6; ++i) {
    auto c = store.claim("a", 50);
    for (auto& j : c.jobs)
      claimed.push_back(j);
  }
  BOOST_REQUIRE_EQUAL(claimed.size(), 300u);
  std::vector<aw::job_outcome> done;
  for (size_t i = 0; i < claimed.size(); ++i)
    if (i % 10 < 7 || i < 100)
      done.push_back(aw::test::outcome(claimed[i],
                                       aw::outcome_kind::completed));
  store.finish(done);
  // Queue b: 100 claimed and completed at once.
  auto cb = store.claim("b", 100);
  std::vector<aw::job_outcome> done_b;
  for (auto& j : cb.jobs)
    done_b.push_back(aw::test::outcome(j, aw::outcome_kind::completed));
  store.finish(done_b);
  // Queue c: five enqueue transactions, claimed in batches that span
  // several of them (every range of a batch: its first, middle and last
  // transaction), partly completed: running and completed lane jobs.
  for (int t = 0; t < 5; ++t)
    s.exec("INSERT INTO jobs_in (kind, queue) SELECT CASE WHEN i % 2 = 0 THEN "
           "'x' ELSE 'y' END, 'c' FROM generate_series(1, 10) AS i");
  auto c1 = store.claim("c", 25);
  BOOST_REQUIRE_EQUAL(c1.jobs.size(), 25u);
  std::vector<aw::job_outcome> done_c;
  for (size_t i = 0; i < 10; ++i)
    done_c.push_back(aw::test::outcome(c1.jobs[i * 2],
                                       aw::outcome_kind::completed));
  store.finish(done_c);
  auto c2 = store.claim("c", 15);
  BOOST_REQUIRE_EQUAL(c2.jobs.size(), 15u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches WHERE queue = 'c' "
                      "AND on_lane AND first_xid <> to_xid")
             >= 1);
  // Row-per-state jobs of every state, interleaved by id with the lanes.
  s.exec("INSERT INTO jobs_in (kind, queue, state, run_at, finalized_at) "
         "SELECT 'x', 'a', 'completed', now() - interval '1 hour', now() "
         "FROM generate_series(1, 120)");
  s.exec("INSERT INTO jobs_in (kind, queue, state, finalized_at, "
         "last_error_message) SELECT CASE WHEN i % 2 = 0 THEN 'x' ELSE 'y' "
         "END, 'b', 'cancelled', now(), 'cancelled' "
         "FROM generate_series(1, 40) AS i");
  s.exec("INSERT INTO jobs_in (kind, queue, state, run_at) SELECT 'y', 'a', "
         "'scheduled', now() + interval '1 hour' FROM generate_series(1, 30)");
  s.exec("INSERT INTO jobs_in (kind, queue, run_at) SELECT 'x', 'b', "
         "now() - interval '1 minute' FROM generate_series(1, 25)");
  s.exec("INSERT INTO job_batches (id, queue, priority, worker, on_lane, size) "
         "VALUES (2, 'a', 0, 'w2', false, 15)");
  s.exec("INSERT INTO jobs_in (kind, queue, state, batch_id) "
         "SELECT 'x', 'a', 'running', 2 FROM generate_series(1, 15)");
  s.exec("INSERT INTO jobs_in (kind, queue, state, callback_id, "
         "callback_timeout_at) SELECT 'y', 'b', 'waiting_external', "
         "gen_random_uuid(), now() + interval '1 hour' "
         "FROM generate_series(1, 12)");
  s.exec("INSERT INTO jobs_in (kind, queue) SELECT 'x', 'b' "
         "FROM generate_series(1, 20)");
  s.exec("ANALYZE jobs_in");
  // Every state is there, both ways where a state has both.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
             == 240 + 100 + 10 + 120);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'")
             == 60 + 15 + 15 + 15);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled'")
             == 30);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'")
             == 100 + 50 + 10 + 25 + 20);

  auto conn = db.connect();
  int checked = 0;
  for (std::string state : {"", "scheduled", "available", "running",
                            "waiting_external", "completed", "cancelled"})
    for (std::string queue : {"", "a", "b", "c"})
      for (std::string kind : {"", "x"})
        for (int64_t limit : {7, 50})
          for (int64_t budget : {100, 20000}) {
            aw::storage::dashboard_job_filter f;
            f.state = state;
            f.queue = queue;
            f.kind = kind;
            f.limit = limit;
            f.scan_budget = budget;
            auto want = column_ids(
              s, "SELECT id FROM jobs_live WHERE " + where_of(state, queue, kind)
                   + " ORDER BY id DESC");
            int pages = 0;
            auto got = all_pages(*conn, f, &pages);
            BOOST_TEST(got == want, "state '" << state << "' queue '" << queue
                                              << "' kind '" << kind
                                              << "' limit " << limit
                                              << " budget " << budget);
            ++checked;
          }
  BOOST_TEST(checked == 7 * 4 * 2 * 2 * 2);

  // A full first page says where the next starts; a filter that matches
  // little under a small budget says it searched only so far.
  aw::storage::dashboard_job_filter f;
  f.limit = 10;
  auto first = aw::storage::dashboard_jobs(*conn, f);
  BOOST_TEST(ids_of(first.rows).size() == 10u);
  BOOST_TEST(!first.partial);
  BOOST_REQUIRE(first.next_before.has_value());
  BOOST_TEST(*first.next_before == ids_of(first.rows).back());
  f.kind = "nope";
  f.scan_budget = 100;
  auto none = aw::storage::dashboard_jobs(*conn, f);
  BOOST_TEST(ids_of(none.rows).empty());
  BOOST_TEST(none.partial);
  BOOST_TEST(none.next_before.has_value());
  // The list rows carry no args.
  auto row = nlohmann::json::parse(first.rows)[0];
  BOOST_TEST(!row.contains("args"));
  BOOST_TEST(row.contains("last_error_message"));
}

BOOST_AUTO_TEST_CASE(dead_letter_pages_groups_counts_and_group_actions) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Three groups: "timeout after <n>s" of kind a (30, in two queues),
  // "user <n> not found" of kind a (20), the same message of kind b (10).
  auto add = [&](const std::string& kind, const std::string& queue,
                 const std::string& message, int n) {
    s.exec("INSERT INTO dead_letter_jobs (original_job_id, kind, queue, args, "
           "priority, attempt, error_count, last_error_message, created_at, "
           "failed_at) SELECT 1000 + i, " + s.conn.quote(kind) + ", "
           + s.conn.quote(queue) + ", '{}', 0, 3, 3, replace("
           + s.conn.quote(message) + ", 'N', i::text), now(), "
           "now() - make_interval(mins => 100 - i) "
           "FROM generate_series(1, " + std::to_string(n) + ") AS i");
  };
  add("a", "q1", "timeout after Ns", 20);
  add("a", "q2", "timeout after Ns", 10);
  add("a", "q1", "user N not found", 20);
  add("b", "q1", "user N not found", 10);
  auto conn = db.connect();

  auto groups = nlohmann::json::parse(aw::storage::failure_groups_json(*conn, 100));
  BOOST_REQUIRE_EQUAL(groups.size(), 3u);
  BOOST_TEST(groups[0]["count"] == 30);
  BOOST_TEST(groups[0]["kind"] == "a");
  BOOST_TEST(groups[0]["fingerprint"] == "timeout after <n>s");
  BOOST_TEST(groups[1]["count"] == 20);
  BOOST_TEST(groups[2]["count"] == 10);
  BOOST_TEST(groups[2]["kind"] == "b");
  BOOST_TEST(groups[0]["first_seen"].get<std::string>()
             < groups[0]["last_seen"].get<std::string>());

  // Pages match the table, with and without filters, to the end.
  for (std::string queue : {"", "q1"})
    for (std::string kind : {"", "a"})
      for (std::string fp : {"", "user <n> not found"})
        for (int64_t budget : {100, 20000}) {
          aw::storage::dashboard_dead_letter_filter f;
          f.match.queue = queue;
          f.match.kind = kind;
          f.match.fingerprint = fp;
          f.limit = 7;
          f.scan_budget = budget;
          std::vector<int64_t> got;
          for (int i = 0; i < 1000; ++i) {
            auto page = aw::storage::dashboard_dead_letters(*conn, f);
            for (auto id : ids_of(page.rows))
              got.push_back(id);
            if (!page.next_before)
              break;
            f.before = *page.next_before;
          }
          std::string w = "true";
          if (!queue.empty())
            w += " AND queue = " + s.conn.quote(queue);
          if (!kind.empty())
            w += " AND kind = " + s.conn.quote(kind);
          if (!fp.empty())
            w += " AND fingerprint = " + s.conn.quote(fp);
          BOOST_TEST(got == column_ids(s, "SELECT id FROM dead_letter_jobs "
                                          "WHERE " + w + " ORDER BY id DESC"),
                     queue << "/" << kind << "/" << fp << "/" << budget);
        }

  aw::storage::dead_letter_filter group;
  group.kind = "a";
  group.fingerprint = "user <n> not found";
  BOOST_TEST(aw::storage::count_dead_letters(*conn, group) == 20);
  aw::storage::dead_letter_filter everything;
  BOOST_TEST(aw::storage::count_dead_letters(*conn, everything) == 60);

  // Retry the group, with its audit row, in one transaction.
  {
    pqxx::work tx{*conn};
    auto moved = aw::storage::retry_dead_letters(tx, group);
    BOOST_TEST(moved.size() == 20u);
    aw::storage::audit_entry e;
    e.action = "dead_letter.retry";
    e.target_json = R"({"kind":"a","fingerprint":"user <n> not found"})";
    e.affected = static_cast<int64_t>(moved.size());
    for (auto& m : moved)
      e.job_ids.push_back(m.job_id);
    e.outcome = "retried 20";
    e.remote_addr = "127.0.0.1";
    e.user_agent = "test";
    e.worker = "w";
    aw::storage::write_audit(tx, e);
    tx.commit();
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE kind = 'a' "
                      "AND fingerprint = 'user <n> not found'")
             == 0);
  // The same message of another kind is another group: untouched.
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE kind = 'b'")
             == 10);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'a' AND "
                      "state = 'available'")
             == 20);
  // A rolled back action leaves neither its change nor its audit row.
  {
    pqxx::work tx{*conn};
    aw::storage::dead_letter_filter b;
    b.kind = "b";
    auto r = aw::storage::purge_dead_letters(tx, b);
    BOOST_TEST(r.purged == 10);
    BOOST_TEST(r.job_ids.size() == 10u);
    aw::storage::audit_entry e;
    e.action = "dead_letter.purge";
    aw::storage::write_audit(tx, e);
    tx.abort();
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE kind = 'b'")
             == 10);
  {
    pqxx::work tx{*conn};
    aw::storage::dead_letter_filter q2;
    q2.queue = "q2";
    BOOST_TEST(aw::storage::purge_dead_letters(tx, q2).purged == 10);
    tx.commit();
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 30);

  auto audit = aw::storage::audit_log_page(*conn, 0, 50);
  auto entries = nlohmann::json::parse(audit.rows);
  BOOST_REQUIRE_EQUAL(entries.size(), 1u);
  BOOST_TEST(entries[0]["action"] == "dead_letter.retry");
  BOOST_TEST(entries[0]["affected"] == 20);
  BOOST_TEST(entries[0]["target"]["fingerprint"] == "user <n> not found");
  BOOST_TEST(entries[0]["job_ids"].size() == 20u);
  BOOST_TEST(!audit.next_before.has_value());
}

BOOST_AUTO_TEST_SUITE_END()
