// Deterministic tests of leader election: lease keepers of simulated
// processes compete for one lease row (stub storages sharing a
// leader_lease, on virtual time), and each tells its "supervisor" whether
// it leads. Heartbeat 1 s, reclaim window 3 s: the lease lasts 2 s past its
// last renewal, so a killed leader is replaced within the window.

#include "actor_fixture.hpp"

#include "actor_worker/actors/lease_keeper.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

/// One simulated worker process: its storage, its lease keeper, and what
/// its supervisor was told.
struct process {
  std::shared_ptr<storage_script> script;
  storage_actor store;
  lease_keeper_actor keeper;
  std::shared_ptr<std::vector<bool>> told
    = std::make_shared<std::vector<bool>>();

  bool leads() const {
    return !told->empty() && told->back();
  }
};

struct leadership_fixture : fixture {
  std::shared_ptr<leader_lease> lease = std::make_shared<leader_lease>();

  /// Starts a process named `worker` competing for `lease`.
  process start(const std::string& worker) {
    process p;
    p.script = std::make_shared<storage_script>();
    p.script->lease = lease;
    p.script->worker = worker;
    p.store = sys->spawn(stub_storage, p.script);
    spawned.push_back(caf::actor_cast<caf::actor>(p.store));
    auto told = p.told;
    auto supervisor = sys->spawn(
      [told](leadership_actor::pointer) -> leadership_actor::behavior_type {
        return {[told](leader_atom, bool leader) { told->push_back(leader); }};
      });
    spawned.push_back(caf::actor_cast<caf::actor>(supervisor));
    lease_keeper_config lc{1s, 3s, p.store, supervisor};
    p.keeper = sys->spawn(aw::lease_keeper_behavior, lc);
    spawned.push_back(caf::actor_cast<caf::actor>(p.keeper));
    run();
    return p;
  }

  /// Kills `p` as kill -9 would: no resign, its lease stays until it
  /// expires.
  void kill(process& p) {
    caf::anon_send_exit(p.keeper, caf::exit_reason::kill);
    caf::anon_send_exit(p.store, caf::exit_reason::kill);
    run();
  }

  /// Asks `p`'s keeper to resign, as the supervisor does at a graceful
  /// stop; returns its reply.
  std::optional<bool> resign(process& p) {
    auto reply = std::make_shared<std::optional<bool>>();
    auto keeper = p.keeper;
    auto client = sys->spawn([keeper, reply](caf::event_based_actor* self) {
      self->request(keeper, caf::infinite, resign_atom::value)
        .then([reply](bool held) { *reply = held; });
    });
    spawned.push_back(client);
    run();
    return *reply;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(leadership_test, leadership_fixture)

BOOST_AUTO_TEST_CASE(a_lone_process_leads_from_its_start) {
  auto a = start("a");
  // At once, not one heartbeat later.
  BOOST_TEST(*a.told == (std::vector<bool>{true}),
             boost::test_tools::per_element());
  BOOST_TEST(lease->holder == "a");
  // Renewed every round; told nothing again while nothing changes.
  for (int i = 0; i < 5; ++i)
    advance(1s);
  BOOST_TEST(a.told->size() == 1u);
  BOOST_TEST(lease->history.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_second_process_is_told_it_does_not_lead) {
  auto a = start("a");
  auto b = start("b");
  BOOST_TEST(*b.told == (std::vector<bool>{false}),
             boost::test_tools::per_element());
  for (int i = 0; i < 10; ++i) {
    advance(1s);
    BOOST_TEST(a.leads());
    BOOST_TEST(!b.leads());
  }
  BOOST_TEST(lease->history == (std::vector<std::string>{"a"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_killed_leader_is_replaced_within_the_reclaim_window) {
  auto a = start("a");
  advance(500ms);
  auto b = start("b");
  auto c = start("c");
  // a renews at t = 1 s, then dies: its lease runs to t = 3 s.
  advance(500ms);
  kill(a);
  auto killed_at = now();
  // Never two leaders: b and c wait while the dead leader's lease lasts.
  while (!b.leads() && !c.leads()) {
    BOOST_REQUIRE(now() - killed_at <= 3s); // the reclaim window
    advance(100ms);
    if (now() - killed_at < 2s) {
      BOOST_TEST(!b.leads());
      BOOST_TEST(!c.leads());
    }
  }
  BOOST_TEST(b.leads() != c.leads()); // exactly one took over
  BOOST_TEST(lease->history.size() == 2u);
  // And stays the only one.
  for (int i = 0; i < 10; ++i)
    advance(1s);
  BOOST_TEST(b.leads() != c.leads());
  BOOST_TEST(lease->history.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_resigning_leader_hands_over_at_once) {
  auto a = start("a");
  auto b = start("b");
  auto held = resign(a);
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST(*held);
  BOOST_TEST(!a.leads());
  BOOST_TEST(lease->holder.empty());
  // The resignation's NOTIFY reaches b's keeper as `elect`: it takes the
  // lease without waiting for its next round.
  caf::anon_send(b.keeper, elect_atom::value);
  run();
  BOOST_TEST(b.leads());
  BOOST_TEST(lease->holder == "b");
  // The resigned process is no candidate any more: its rounds go on while
  // it drains, and never take the lease back.
  lease->holder.clear();
  advance(1s);
  BOOST_TEST(!a.leads());
  BOOST_TEST(a.script->node_refreshes.size() >= 2u);
}

BOOST_AUTO_TEST_CASE(resigning_a_lease_not_held_changes_nothing) {
  auto a = start("a");
  auto b = start("b");
  auto held = resign(b);
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST(!*held);
  BOOST_TEST(lease->holder == "a");
  BOOST_TEST(a.leads());
}

BOOST_AUTO_TEST_CASE(a_leader_cut_off_steps_down_and_leads_again_after) {
  auto a = start("a");
  a.script->fail_nodes = true; // its database connection is gone
  advance(1s);
  // It cannot tell whether its lease was renewed: it steps down.
  BOOST_TEST(*a.told == (std::vector<bool>{true, false}),
             boost::test_tools::per_element());
  a.script->fail_nodes = false;
  advance(1s);
  // Its lease was still its own (nobody else took it): it leads again.
  BOOST_TEST(*a.told == (std::vector<bool>{true, false, true}),
             boost::test_tools::per_element());
  BOOST_TEST(lease->history == (std::vector<std::string>{"a"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_leader_cut_off_too_long_loses_the_lease_to_another) {
  auto a = start("a");
  auto b = start("b");
  a.script->fail_nodes = true;
  for (int i = 0; i < 4; ++i)
    advance(1s);
  BOOST_TEST(!a.leads());
  BOOST_TEST(b.leads());
  a.script->fail_nodes = false;
  advance(1s);
  // Back, but the lease is b's now.
  BOOST_TEST(!a.leads());
  BOOST_TEST(b.leads());
}

BOOST_AUTO_TEST_SUITE_END()
