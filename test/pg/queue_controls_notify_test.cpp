// queue_controls announces every change of a queue's pause itself
// (migrations/016_queue_controls_notify.sql): a plain-SQL UPDATE, INSERT,
// DELETE or TRUNCATE is heard on the listener's channel with the payload the
// listener parses ("pause:QUEUE", "resume:QUEUE"), only when committed and
// only when the pause changed; the CLI's pause sends exactly one; and a
// running worker is told of a plain-SQL pause and resume at once, not at
// its next poll.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/storage/notification_listener.hpp"
#include "log_capture.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;
using strings = std::vector<std::string>;

namespace {

/// A LISTEN connection on the queue controls channel.
struct controls_listener {
  explicit controls_listener(const std::string& url)
    : listener(url, {aw::defaults::queue_controls_channel}) {
    listener.connect();
  }

  /// The payloads heard: waits up to 5 s for `expected` of them, then
  /// 300 ms more for any extra (so a duplicate would be seen).
  strings heard(size_t expected) {
    strings out;
    auto give_up = std::chrono::steady_clock::now() + 5s;
    while (out.size() < expected && std::chrono::steady_clock::now() < give_up)
      for (auto& n : listener.wait_for(50ms))
        out.push_back(n.payload);
    for (auto& n : listener.wait_for(300ms))
      out.push_back(n.payload);
    return out;
  }

  aw::storage::notification_listener listener;
};

} // namespace

BOOST_AUTO_TEST_SUITE(queue_controls_notify_test)

BOOST_AUTO_TEST_CASE(a_pause_written_with_plain_sql_is_announced) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  controls_listener l{db.url};

  // A new row that is not paused (what every worker start writes): nothing.
  s.exec("INSERT INTO queue_controls (queue) VALUES ('q')");
  BOOST_TEST(l.heard(0) == strings{}, boost::test_tools::per_element());

  s.exec("UPDATE queue_controls SET paused = true, paused_at = now() "
         "WHERE queue = 'q'");
  BOOST_TEST(l.heard(1) == strings{"pause:q"}, boost::test_tools::per_element());

  // No change of the pause, no notification: paused again, a limit set.
  s.exec("UPDATE queue_controls SET paused = true WHERE queue = 'q'");
  s.exec("UPDATE queue_controls SET global_concurrency = 3 WHERE queue = 'q'");
  BOOST_TEST(l.heard(0) == strings{}, boost::test_tools::per_element());

  // A resume that rolls back is never heard.
  s.exec("BEGIN; UPDATE queue_controls SET paused = false WHERE queue = 'q'; "
         "ROLLBACK");
  BOOST_TEST(l.heard(0) == strings{}, boost::test_tools::per_element());

  s.exec("UPDATE queue_controls SET paused = false, paused_at = NULL "
         "WHERE queue = 'q'");
  BOOST_TEST(l.heard(1) == strings{"resume:q"}, boost::test_tools::per_element());

  // Inserted paused; deleted while paused (no row: not paused).
  s.exec("INSERT INTO queue_controls (queue, paused) VALUES ('r', true)");
  BOOST_TEST(l.heard(1) == strings{"pause:r"}, boost::test_tools::per_element());
  s.exec("DELETE FROM queue_controls WHERE queue = 'r'");
  BOOST_TEST(l.heard(1) == strings{"resume:r"}, boost::test_tools::per_element());

  // Several rows in one statement; TRUNCATE resumes the paused ones.
  s.exec("INSERT INTO queue_controls (queue, paused) VALUES ('s', true), "
         "('t', true), ('u', false)");
  BOOST_TEST(l.heard(2) == (strings{"pause:s", "pause:t"}),
             boost::test_tools::per_element());
  s.exec("TRUNCATE queue_controls");
  auto truncated = l.heard(2);
  std::sort(truncated.begin(), truncated.end());
  BOOST_TEST(truncated == (strings{"resume:s", "resume:t"}),
             boost::test_tools::per_element());

  // The claim sees a plain-SQL pause too (it always did).
  s.exec("INSERT INTO queue_controls (queue, paused) VALUES ('q', true)");
  BOOST_TEST(l.heard(1) == strings{"pause:q"}, boost::test_tools::per_element());
  BOOST_TEST(s.scalar("SELECT count(*) FROM actor_worker_claim('q', 'w', 0, "
                      "1000000, NULL, '{}', 2000) WHERE note->>'paused' = 'true'")
             == 1);
}

BOOST_AUTO_TEST_CASE(the_cli_pause_and_resume_send_one_notification_each) {
  aw::test::fresh_database db;
  db.exec("INSERT INTO jobs_in (kind, queue) VALUES ('noop', 'mail')");
  controls_listener l{db.url};

  auto paused = aw::test::run_binary("queues pause mail", db.url);
  BOOST_TEST_REQUIRE(paused.exit_code == 0, paused.err);
  BOOST_TEST(l.heard(1) == strings{"pause:mail"},
             boost::test_tools::per_element());
  // Pausing a paused queue changes nothing and says nothing.
  auto again = aw::test::run_binary("queues pause mail", db.url);
  BOOST_TEST_REQUIRE(again.exit_code == 0, again.err);
  BOOST_TEST(l.heard(0) == strings{}, boost::test_tools::per_element());

  auto resumed = aw::test::run_binary("queues resume mail", db.url);
  BOOST_TEST_REQUIRE(resumed.exit_code == 0, resumed.err);
  BOOST_TEST(l.heard(1) == strings{"resume:mail"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_worker_is_told_of_a_plain_sql_pause_at_once) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  std::atomic<int> ran{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("tick", [&](const nlohmann::json&, const aw::job_context&) {
    ++ran;
  });
  auto cfg = db.config(2);
  // Longer than the test: a poll cannot be what finds the pause.
  cfg.worker.poll_interval = 60s;
  aw::test::log_capture log;
  {
    aw::test::worker_node node{cfg, reg};
    s.exec("INSERT INTO jobs_in (kind) VALUES ('tick')");
    BOOST_REQUIRE(aw::test::wait_until([&] { return ran.load() == 1; }, 20s));
    // The listener has issued its LISTENs (the channel is its last).
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname "
                        "= current_database() AND query LIKE 'LISTEN %"
                        "actor_worker_queue_controls%'")
               == 1;
      },
      20s));

    // (The row every worker writes at start for each queue it serves.)
    BOOST_REQUIRE(s.scalar("SELECT count(*) FROM queue_controls "
                           "WHERE queue = 'default' AND NOT paused") == 1);
    auto t0 = std::chrono::steady_clock::now();
    s.exec("UPDATE queue_controls SET paused = true, paused_at = now() "
           "WHERE queue = 'default'");
    BOOST_REQUIRE(aw::test::wait_until(
      [&] { return log.has("queue paused (told by NOTIFY)"); }, 10s));
    BOOST_TEST_MESSAGE("paused by plain SQL, told after "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count()
                       << " ms");
    // Paused: a job enqueued now waits (its NOTIFY wakes a paused poller).
    s.exec("INSERT INTO jobs_in (kind) VALUES ('tick')");
    std::this_thread::sleep_for(1s);
    BOOST_TEST(ran.load() == 1);
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'")
               == 1);

    s.exec("UPDATE queue_controls SET paused = false, paused_at = NULL "
           "WHERE queue = 'default'");
    BOOST_TEST(aw::test::wait_until(
      [&] { return log.has("queue resumed (told by NOTIFY)"); }, 10s));
    BOOST_TEST(aw::test::wait_until([&] { return ran.load() == 2; }, 10s));
    BOOST_TEST(!log.has("found on a poll"));
    BOOST_TEST(!log.has("found on a claim"));
  }
}

BOOST_AUTO_TEST_SUITE_END()
