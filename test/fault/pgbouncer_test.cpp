// Workers behind a real PgBouncer in transaction pooling mode (issue 12):
// `[database] pooler = "transaction"`, no LISTEN, and fewer server
// connections than the workers open. 20,000 jobs run exactly once; a
// PgBouncer restart in the middle of a drain costs no job and no worker.

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

namespace {

constexpr int drain_jobs = 20'000;
/// `record` jobs of the restart test (two commits each, so the drain lasts
/// long enough to restart the pooler in its middle).
constexpr int restart_jobs = 6'000;
/// Server connections PgBouncer may open to PostgreSQL: fewer than the two
/// workers' clients (two claim connections, maintenance and one `record`
/// connection per running job, each).
constexpr int server_connections = 3;

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string{"'\\''"} : std::string{c};
  return out + "'";
}

/// A PgBouncer (pool_mode = transaction) in front of `cluster`, on a
/// reserved port, its files in a directory of its own (readable by the
/// postgres user: as root, PgBouncer is started as that user).
class pgbouncer {
public:
  pgbouncer(const std::string& dir, const pg_cluster& cluster)
    : dir_(dir + "/pgbouncer") {
    ::mkdir(dir_.c_str(), 0777);
    ::chmod(dir_.c_str(), 0777); // not narrowed by the umask
    write_files(cluster);
    start();
  }

  ~pgbouncer() {
    stop();
    std::system(("rm -rf " + quoted(dir_)).c_str());
  }

  pgbouncer(const pgbouncer&) = delete;
  pgbouncer& operator=(const pgbouncer&) = delete;

  void write_files(const pg_cluster& cluster) {
    std::ofstream users{dir_ + "/userlist.txt"};
    users << "\"postgres\" \"\"\n";
    std::ofstream ini{dir_ + "/pgbouncer.ini"};
    ini << "[databases]\n"
        << "* = host=127.0.0.1 port=" << cluster.port() << "\n"
        << "[pgbouncer]\n"
        << "listen_addr = 127.0.0.1\n"
        << "listen_port = " << port_.port() << "\n"
        << "unix_socket_dir =\n"
        << "auth_type = trust\n"
        << "auth_file = " << dir_ << "/userlist.txt\n"
        << "pool_mode = transaction\n"
        << "default_pool_size = " << server_connections << "\n"
        << "max_db_connections = " << server_connections << "\n"
        << "max_client_conn = 500\n"
        << "logfile = " << dir_ << "/pgbouncer.log\n"
        << "pidfile = " << dir_ << "/pgbouncer.pid\n";
    ini.close();
    users.close();
    BOOST_REQUIRE_MESSAGE(ini.good() && users.good(),
                          "cannot write PgBouncer's files in " << dir_);
  }

  /// Starts it as a daemon and waits until it accepts connections.
  void start() {
    std::string user = ::geteuid() == 0 ? " -u postgres" : "";
    auto cmd = "pgbouncer -d -q" + user + " " + quoted(dir_ + "/pgbouncer.ini")
               + " >>" + quoted(dir_ + "/start.log") + " 2>&1";
    int status = std::system(cmd.c_str());
    BOOST_REQUIRE_MESSAGE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                          "pgbouncer did not start: "
                            << slurp(dir_ + "/start.log")
                            << slurp(dir_ + "/pgbouncer.log"));
    running_ = true;
    BOOST_REQUIRE_MESSAGE(wait_until(
                            [&] {
                              pqxx::connection c{url()};
                              return c.is_open();
                            },
                            20s),
                          "pgbouncer does not accept connections: "
                            << slurp(dir_ + "/pgbouncer.log"));
  }

  /// Immediate shutdown (SIGTERM): every client and server connection is
  /// cut at once, as a crash or a restart of the pooler does.
  void stop() {
    if (!running_)
      return;
    running_ = false;
    auto pid = std::atoi(slurp(dir_ + "/pgbouncer.pid").c_str());
    if (pid <= 0)
      return;
    ::kill(pid, SIGTERM);
    wait_until([&] { return ::kill(pid, 0) != 0; }, 20s);
  }

  std::string url() const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_.port())
           + "/postgres";
  }

  std::string log() const {
    return slurp(dir_ + "/pgbouncer.log");
  }

private:
  std::string dir_;
  port_reservation port_;
  bool running_ = false;
};

/// A worker config behind the pooler: no LISTEN (no listen_url).
std::string pooled_config(fault_env& env, const std::string& node) {
  auto path = env.dir() + "/pooled-" + node + ".toml";
  std::ofstream out{path};
  out << "[database]\n"
      << "pooler = \"transaction\"\n"
      << "[worker]\n"
      << "node = \"" << node << "\"\n"
      << "poll_interval = \"100ms\"\n"
      << "heartbeat_interval = \"1s\"\n"
      << "reclaim_window = \"5s\"\n"
      << "shutdown_drain = \"2s\"\n"
      << "completed_retention = \"1h\"\n"
      << "[queues.default]\n"
      << "concurrency = 10\n";
  BOOST_REQUIRE_MESSAGE(out.good(), "cannot write " << path);
  return path;
}

std::unique_ptr<worker_process> pooled_worker(fault_env& env,
                                              const pgbouncer& bouncer,
                                              const std::string& node) {
  return std::make_unique<worker_process>(
    node, std::vector<std::string>{"--config", pooled_config(env, node), "run"},
    bouncer.url(), env.dir());
}

void enqueue_jobs(db_session& db, const std::string& kind, int n) {
  db.exec("INSERT INTO jobs_in (kind, args) SELECT " + db.quote(kind)
          + ", '{}' FROM generate_series(1, " + std::to_string(n) + ")");
}

/// Stops `w` gracefully and returns how many handlers it ran, from the
/// summary its poller logs at stop ("poller[default]: N handler(s) ran").
int64_t handlers_run(worker_process& w) {
  w.signal(SIGTERM);
  auto code = w.wait_exit(60s);
  BOOST_REQUIRE_MESSAGE(code.has_value(), w.label() << " did not stop");
  BOOST_TEST(*code == 0);
  auto err = w.err();
  const std::string marker = "poller[default]: ";
  auto at = err.rfind(marker);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos,
                        w.label() << " logged no summary at stop");
  return std::stoll(err.substr(at + marker.size()));
}

/// The server's client backends other than `db`'s own session.
int64_t server_sessions(db_session& db) {
  return db.scalar("SELECT count(*) FROM pg_stat_activity WHERE backend_type "
                   "= 'client backend' AND pid <> pg_backend_pid()");
}

} // namespace

BOOST_AUTO_TEST_SUITE(pgbouncer_test)

BOOST_AUTO_TEST_CASE(two_workers_drain_through_transaction_pooling_exactly_once) {
  fault_env env{"pgbouncer_drain"};
  pgbouncer bouncer{env.dir(), env.cluster()};
  db_session db{env.url()};
  enqueue_jobs(db, "noop", drain_jobs);
  auto a = pooled_worker(env, bouncer, "A");
  auto b = pooled_worker(env, bouncer, "B");
  int64_t peak_sessions = 0;
  auto completed = [&] {
    peak_sessions = std::max(peak_sessions, server_sessions(db));
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'");
  };
  bool done = wait_until([&] { return completed() == drain_jobs; }, 300s,
                         200ms);
  BOOST_REQUIRE_MESSAGE(done, "not every job completed: "
                                << db.describe("SELECT string_agg(state || ' "
                                               "' || n, ', ') FROM (SELECT "
                                               "state, count(*) AS n FROM jobs_live "
                                               "GROUP BY state) s"));
  BOOST_TEST(a->running());
  BOOST_TEST(b->running());
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE attempt <> 1") == 0);
  // Both worked, through at most `server_connections` server sessions.
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE locked_by LIKE 'A:%'")
             > 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE locked_by LIKE 'B:%'")
             > 0);
  BOOST_TEST_MESSAGE("peak server sessions: " << peak_sessions);
  BOOST_TEST(peak_sessions <= server_connections);
  // Exactly once: the handlers of both workers ran 20,000 times in all.
  auto ran = handlers_run(*a) + handlers_run(*b);
  BOOST_TEST(ran == drain_jobs);
  // Nothing a pooler in transaction mode breaks: no prepared statement
  // went missing, no LISTEN was tried.
  for (auto* w : {a.get(), b.get()}) {
    auto err = w->err();
    BOOST_TEST(!contains(err, "prepared statement"));
    BOOST_TEST(!contains(err, "[error]"), "worker " << w->label() << " logged an error");
    BOOST_TEST(contains(err, "no LISTEN"));
  }
}

BOOST_AUTO_TEST_CASE(a_pgbouncer_restart_mid_drain_loses_no_job) {
  fault_env env{"pgbouncer_restart"};
  pgbouncer bouncer{env.dir(), env.cluster()};
  db_session db{env.url()};
  enqueue_jobs(db, "record", restart_jobs);
  auto a = pooled_worker(env, bouncer, "A");
  auto b = pooled_worker(env, bouncer, "B");
  auto completed = [&] {
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'");
  };
  BOOST_REQUIRE(wait_until([&] { return completed() >= restart_jobs / 4; },
                           120s, 100ms));
  auto before = completed();
  bouncer.stop();
  std::this_thread::sleep_for(2s);
  bouncer.start();
  BOOST_TEST_MESSAGE("PgBouncer restarted at " << before << " completed");
  bool done = wait_until([&] { return completed() == restart_jobs; }, 300s,
                         250ms);
  BOOST_REQUIRE_MESSAGE(done, "not every job completed: "
                                << db.describe("SELECT string_agg(state || ' "
                                               "' || n, ', ') FROM (SELECT "
                                               "state, count(*) AS n FROM jobs_live "
                                               "GROUP BY state) s"));
  // Both rode it out (and said so at ERROR); none lost or dead-lettered.
  BOOST_TEST(a->running());
  BOOST_TEST(b->running());
  BOOST_TEST((contains(a->err(), "[error]") || contains(b->err(), "[error]")));
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == restart_jobs);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live j WHERE NOT EXISTS ("
                       "SELECT 1 FROM job_executions e WHERE e.job_id = j.id "
                       "AND e.finished_at IS NOT NULL)")
             == 0);
  // At least once: runs cut off by the restart ran again. Reported.
  BOOST_TEST_MESSAGE("executions: "
                     << db.scalar("SELECT count(*) FROM job_executions")
                     << " for " << restart_jobs << " jobs");
}

BOOST_AUTO_TEST_SUITE_END()
