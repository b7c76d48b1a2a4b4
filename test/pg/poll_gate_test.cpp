// An idle poll gate shared by several runtimes (each on an actor system of
// its own, as separately embedded components would be): together their
// pollers poll on the idle interval only as often as the gate's permits
// allow, while jobs are still picked up at once when they arrive.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "actor_worker/app/idle_poll_gate.hpp"
#include "lifecycle_helpers.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;

namespace {

/// Counts claim statements: actor_worker_claim is wrapped by a function
/// that bumps a sequence (non-transactional, so even claims that find
/// nothing count) and calls the original.
void count_claims(aw::test::db_session& s) {
  s.exec(R"sql(
CREATE SEQUENCE test_claims;
ALTER FUNCTION actor_worker_claim(text, text, integer, bigint, text[], text[], integer)
  RENAME TO actor_worker_claim_counted;
CREATE FUNCTION actor_worker_claim(
  p_queue text, p_worker text, p_limit integer, p_max_bytes bigint,
  p_kinds text[], p_observed text[], p_lane_wait_ms integer)
RETURNS TABLE (lease bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text, note jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM nextval('test_claims');
  RETURN QUERY SELECT * FROM actor_worker_claim_counted(
    p_queue, p_worker, p_limit, p_max_bytes, p_kinds, p_observed, p_lane_wait_ms);
END $$;
)sql");
}

int64_t claims(aw::test::db_session& s) {
  return s.scalar("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
                  "FROM test_claims");
}

/// Three queues polling every 100 ms, no gate of their own.
aw::runtime_config three_queues(const aw::test::fresh_database& db,
                                const std::string& node) {
  auto cfg = db.config(1);
  cfg.worker.node = node;
  cfg.worker.idle_poll_permits = 0;
  cfg.queues.clear();
  for (auto* name : {"a", "b", "c"}) {
    aw::queue_config q;
    q.name = name;
    q.concurrency = 1;
    cfg.queues.push_back(q);
  }
  cfg.validate();
  return cfg;
}

std::shared_ptr<aw::registry> noop_registry() {
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("noop", [](const nlohmann::json&, const aw::job_context&) {});
  return reg;
}

/// Claims made by two idle runtimes over `window`, after a settling time.
int64_t idle_claims(aw::test::db_session& s, std::chrono::milliseconds window,
                    const std::function<void()>& settle) {
  settle();
  auto before = claims(s);
  std::this_thread::sleep_for(window);
  return claims(s) - before;
}

} // namespace

BOOST_AUTO_TEST_SUITE(poll_gate_test)

BOOST_AUTO_TEST_CASE(runtimes_sharing_a_gate_poll_idly_only_as_its_permits_allow) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  count_claims(s);
  auto reg = noop_registry();
  constexpr auto window = 2s;
  // Control: two runtimes of three idle pollers each, ungated, poll every
  // 100 ms (six pollers' worth of claims).
  int64_t ungated = 0;
  {
    aw::test::worker_node n1{three_queues(db, "n1"), reg};
    aw::test::worker_node n2{three_queues(db, "n2"), reg};
    ungated = idle_claims(s, window, [] { std::this_thread::sleep_for(1s); });
  }
  // The same two runtimes sharing one gate of one permit: one poller's
  // worth.
  caf::actor_system_config gate_sys_cfg;
  caf::actor_system gate_sys{gate_sys_cfg};
  auto gate = std::make_shared<aw::idle_poll_gate>(gate_sys, 1);
  {
    aw::test::worker_node n1{three_queues(db, "n1"), reg, gate};
    aw::test::worker_node n2{three_queues(db, "n2"), reg, gate};
    auto gated = idle_claims(s, window, [] { std::this_thread::sleep_for(1s); });
    BOOST_TEST_MESSAGE("idle claims in " << window.count() << " s: ungated "
                                         << ungated << ", shared gate of 1 "
                                         << gated);
    // Six pollers against one permit: a sixth of the claims, give or take
    // the timers of a busy machine (measured 76 against 12).
    BOOST_TEST(ungated >= 30);
    BOOST_TEST(gated <= 30);
    BOOST_TEST(gated * 3 <= ungated);
    BOOST_TEST(gated >= 3); // the permit holder does poll
    // Parked pollers still pick work up at once: NOTIFY wakes them all.
    std::vector<int64_t> ids;
    for (auto* queue : {"a", "b", "c"}) {
      aw::insert_options opts;
      opts.queue = queue;
      ids.push_back(aw::test::enqueue_one(db, "noop", {}, opts));
    }
    BOOST_TEST(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
               == 3;
      },
      5s));
  }
}

BOOST_AUTO_TEST_CASE(a_gate_needs_at_least_one_permit) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  BOOST_CHECK_THROW(aw::idle_poll_gate(sys, 0), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
