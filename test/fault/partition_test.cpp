// A worker cut off from the database while another one still reaches it
// (its sessions frozen with SIGSTOP, so its statements hang instead of
// failing): its watchdog must give its runs up one heartbeat before their
// leases expire, i.e. before another worker may reclaim them.

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <ctime>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <regex>
#include <string>
#include <vector>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

namespace {

/// SIGSTOPs the given server processes; SIGCONTs them when it ends.
struct frozen_backends {
  explicit frozen_backends(std::vector<pid_t> pids) : pids(std::move(pids)) {
    for (auto pid : this->pids)
      ::kill(pid, SIGSTOP);
  }
  ~frozen_backends() {
    thaw();
  }
  void thaw() {
    for (auto pid : pids)
      ::kill(pid, SIGCONT);
    pids.clear();
  }
  std::vector<pid_t> pids;
};

/// "[2026-11-30 05:13:08.696]" (local time) as seconds since the epoch.
double log_time(const std::string& stamp) {
  std::tm tm{};
  int ms = 0;
  std::sscanf(stamp.c_str(), "%d-%d-%d %d:%d:%d.%d", &tm.tm_year, &tm.tm_mon,
              &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  return static_cast<double>(std::mktime(&tm)) + ms / 1000.0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(partition_test)

BOOST_AUTO_TEST_CASE(cut_off_worker_abandons_its_runs_before_another_reclaims_them) {
  fault_env env{"partition"};
  db_session db{env.url()};
  constexpr int jobs = 5;
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'record', '{\"ms\": 60000}' "
          "FROM generate_series(1, "
          + std::to_string(jobs) + ")");
  // The defaults' ratio (reclaim window = 4 heartbeats), scaled down: the
  // watchdog must give a run up 9 s after its last refresh, one heartbeat
  // (3 s) before the lease expires.
  constexpr double heartbeat = 3.0, reclaim = 12.0;
  worker_timings ta;
  ta.node = "A";
  ta.heartbeat_interval = "3s";
  ta.reclaim_window = "12s";
  ta.env = {"PGAPPNAME=worker-A"};
  auto a = env.start_worker("A", ta);
  BOOST_REQUIRE(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM job_executions WHERE worker LIKE 'A:%'")
             == jobs;
    },
    60s));
  auto a_id = db.text("SELECT min(worker) FROM job_executions");
  // Let a heartbeat succeed, then cut A off: every session it has (pool,
  // LISTEN, the handlers' own) stops answering, as behind a partition;
  // the database itself and worker B carry on.
  // A's leases live as long as its worker_nodes row is refreshed (each
  // heartbeat round): wait for a fresh refresh.
  BOOST_REQUIRE(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM worker_nodes WHERE worker_id = '" + a_id
                       + "' AND last_seen_at > clock_timestamp() - interval '1.5 seconds'")
             == 1;
    },
    30s, 50ms));
  // A partition finds a session idle or inside a statement, and one in
  // autocommit finishes and commits on the server, releasing its locks,
  // whatever became of the client. SIGSTOP can stop one mid-statement,
  // holding its locks for as long as the test (a hung server process,
  // not a partition): so the sessions are frozen at a moment all of them
  // are idle, found by freezing and looking.
  std::unique_ptr<frozen_backends> frozen;
  std::string pid_list;
  BOOST_REQUIRE(wait_until(
    [&] {
      std::vector<pid_t> pids;
      pid_list.clear();
      for (const auto& row : db.query("SELECT pid FROM pg_stat_activity "
                                      "WHERE application_name = 'worker-A'")) {
        pids.push_back(row[0].as<int>());
        pid_list += (pid_list.empty() ? "" : ",") + row[0].as<std::string>();
      }
      if (pids.empty())
        return false;
      frozen = std::make_unique<frozen_backends>(pids);
      if (db.scalar("SELECT count(*) FROM pg_stat_activity WHERE pid IN ("
                    + pid_list + ") AND state IS DISTINCT FROM 'idle'")
          == 0)
        return true;
      frozen.reset();
      return false;
    },
    10s, 10ms));
  BOOST_TEST_MESSAGE("froze sessions " << pid_list << " of worker " << a_id);
  // The leases as the rest of the cluster sees them: nothing A does while
  // cut off can commit.
  std::map<int64_t, double> lease_at;
  for (const auto& row : db.query("SELECT j.id, extract(epoch FROM n.last_seen_at)::double precision "
                                  "FROM jobs_live AS j JOIN worker_nodes AS n "
                                  "ON n.worker_id = j.locked_by"))
    lease_at[row[0].as<int64_t>()] = row[1].as<double>();
  BOOST_REQUIRE_EQUAL(lease_at.size(), static_cast<size_t>(jobs));

  worker_timings tb = ta;
  tb.node = "B";
  tb.env = {"PGAPPNAME=worker-B"};
  auto b = env.start_worker("B", tb);
  BOOST_REQUIRE_MESSAGE(
    wait_until(
      [&] {
        return db.scalar("SELECT count(*) FROM job_executions WHERE worker LIKE 'B:%'")
               == jobs;
      },
      120s),
    "worker B did not take the jobs over");
  // A's handlers were cancelled by its watchdog; when, by A's log.
  std::map<int64_t, double> a_ended;
  std::regex returned{R"(^\[([^\]]+)\] \[actor-worker\] \[warning\] job (\d+): )"
                      R"(handler returned after the job stopped being ours \(abandoned by the watchdog)"};
  BOOST_REQUIRE(wait_until(
    [&] {
      a_ended.clear();
      std::istringstream log{a->err()};
      for (std::string line; std::getline(log, line);) {
        std::smatch m;
        if (std::regex_search(line, m, returned))
          a_ended[std::stoll(m[2])] = log_time(m[1]);
      }
      return a_ended.size() == static_cast<size_t>(jobs);
    },
    10s));

  auto rows = db.query(
    "SELECT e.job_id, extract(epoch FROM e.started_at)::double precision, "
    "  extract(epoch FROM j.last_failed_at)::double precision, j.error_count, "
    "  j.last_error_message "
    "FROM job_executions e JOIN jobs j ON j.id = e.job_id "
    "WHERE e.worker LIKE 'B:%' ORDER BY e.job_id");
  BOOST_REQUIRE_EQUAL(rows.size(), static_cast<size_t>(jobs));
  for (const auto& row : rows) {
    auto id = row[0].as<int64_t>();
    auto b_started = row[1].as<double>();
    auto reclaimed = row[2].as<double>();
    auto expires = lease_at.at(id) + reclaim;
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_TEST_MESSAGE("job " << id << ", relative to its last lease refresh: A gave the run up after "
                                << a_ended.at(id) - lease_at.at(id) << " s, B reclaimed it after "
                                << reclaimed - lease_at.at(id) << " s and started it after "
                                << b_started - lease_at.at(id) << " s");
      // The watchdog's promise: the run ends one heartbeat before the lease
      // expires (asserted with half a heartbeat to spare), so no other
      // worker ever reclaims a job whose run is still going. (Before the
      // fix in actors/lease_keeper.cpp, a hanging database delayed this to
      // the very moment the lease expired.)
      BOOST_TEST(a_ended.at(id) < expires - heartbeat / 2);
      BOOST_TEST(a_ended.at(id) < reclaimed);
      BOOST_TEST(a_ended.at(id) < b_started);
      BOOST_TEST(row[3].as<int>() == 1);
      BOOST_TEST(contains(row[4].as<std::string>(), a_id));
    }
  }
  frozen->thaw();
  BOOST_TEST(a->running());
  BOOST_TEST(b->running());
}

BOOST_AUTO_TEST_SUITE_END()
