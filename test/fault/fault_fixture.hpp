#pragma once
// The fault tests' fixture: real actor-worker processes (AW_BINARY) against
// a real PostgreSQL cluster of the test's own (scripts/pg.sh, AW_PG_SCRIPT),
// which the test may stop, restart or starve without disturbing any other
// test. Everything is RAII: a cluster is stopped and its directory removed,
// a worker is killed and reaped, also when the test fails or throws. Worker
// children die with the test process (PR_SET_PDEATHSIG).
//
// No CAF here: processes are driven with fork/exec/kill/waitpid and the
// database is read with libpqxx.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <pqxx/pqxx>

namespace aw::fault {

/// The actor-worker binary under test (AW_BINARY).
std::string binary_path();

/// scripts/pg.sh (AW_PG_SCRIPT).
std::string pg_script();

/// True once an assertion of the running test case failed.
bool current_test_failed();

/// Polls `condition` every `every` until it holds or `timeout` passes; an
/// exception from `condition` (the database is down) counts as "not yet".
bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds{100});

std::string slurp(const std::string& path);

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A TCP port from AW_FAULT_PORT_FIRST..AW_FAULT_PORT_LAST (default
/// 25400..25499), held for this object's lifetime: an flock on
/// /tmp/aw_fault_port_PORT.lock keeps other fault tests (in this or another
/// build) off it even while the cluster is down, and the port was free for
/// bind() when picked.
class port_reservation {
public:
  port_reservation();
  ~port_reservation();
  port_reservation(const port_reservation&) = delete;
  port_reservation& operator=(const port_reservation&) = delete;
  int port() const {
    return port_;
  }

private:
  int port_ = 0;
  int lock_fd_ = -1;
};

/// A throwaway PostgreSQL cluster in DIR/pg on a reserved port. Started by
/// the constructor; stopped (and DIR/pg removed) by the destructor.
class pg_cluster {
public:
  /// `dir` must exist; the cluster lives in dir/pg.
  explicit pg_cluster(const std::string& dir);
  /// A streaming hot standby of `primary` (which must be running), in
  /// dir/NAME on a port of its own: a base backup of the primary, started
  /// with standby.signal and primary_conninfo (pg.sh standby). Its
  /// replication is asynchronous until the primary names it in
  /// synchronous_standby_names.
  pg_cluster(const std::string& dir, const std::string& name,
             const pg_cluster& primary);
  ~pg_cluster();
  pg_cluster(const pg_cluster&) = delete;
  pg_cluster& operator=(const pg_cluster&) = delete;

  void start();
  /// Fast shutdown (pg_ctl -m fast): every session is disconnected.
  void stop();
  /// stop() then start() on the same directory and port.
  void restart();
  /// Immediate shutdown (pg_ctl -m immediate): sessions cut, no
  /// checkpoint, WAL not yet sent to a standby stays behind, as in a crash.
  void crash();
  /// Promotes a standby to primary; returns once it accepts writes.
  void promote();
  bool running() const {
    return running_;
  }

  std::string url() const;
  int port() const {
    return port_.port();
  }
  /// The server's log (tail shown when a test fails).
  std::string log_path() const {
    return dir_ + "/server.log";
  }

private:
  void pg(const std::string& args);
  std::string dir_;
  port_reservation port_;
  bool running_ = false;
};

/// One database session for checks; reconnects after any error, so a check
/// that runs while the server is down just throws and the next one works.
class db_session {
public:
  explicit db_session(std::string url) : url_(std::move(url)) {
  }

  pqxx::result query(const std::string& sql);
  /// First column of the first row as int64 (0 when NULL).
  int64_t scalar(const std::string& sql);
  /// First column of the first row as text ("" when NULL).
  std::string text(const std::string& sql);
  void exec(const std::string& sql) {
    query(sql);
  }
  /// text(sql) for failure messages: never throws ("(unavailable: ...)").
  /// Boost evaluates the operands of an assertion's message eagerly, so
  /// call it only when the assertion failed.
  std::string describe(const std::string& sql);
  /// `text` as an SQL string literal.
  std::string quote(const std::string& text);

private:
  std::string url_;
  std::unique_ptr<pqxx::connection> conn_;
};

/// An actor-worker process with stdout and stderr going to files. Killed
/// (SIGKILL) and reaped by the destructor if still running; when the test
/// failed, the tail of its stderr is printed.
class worker_process {
public:
  /// `extra_env`: more NAME=VALUE entries for the child's environment;
  /// `program`: another program to run instead (a Prometheus server).
  worker_process(std::string label, const std::vector<std::string>& args,
                 const std::string& database_url, const std::string& log_dir,
                 const std::vector<std::string>& extra_env = {},
                 const std::string& program = {});
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  pid_t pid() const {
    return pid_;
  }
  const std::string& label() const {
    return label_;
  }
  /// Reaps the process if it ended (non-blocking).
  bool running();
  /// The exit code (128 + signal when killed), or nothing while it runs
  /// after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  void signal(int sig);
  /// kill -9 and reap.
  void kill9();

  std::string out() const {
    return slurp(out_path_);
  }
  std::string err() const {
    return slurp(err_path_);
  }

private:
  std::string label_;
  std::string out_path_;
  std::string err_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

struct command_result {
  int exit_code;
  std::string out;
  std::string err;
};

/// Worker timings for a fault test: short enough that a test takes
/// seconds, in the same proportions as the defaults.
struct worker_timings {
  std::string node = "A";
  int concurrency = 10;
  std::string heartbeat_interval = "1s";
  std::string reclaim_window = "3s";
  std::string poll_interval = "200ms";
  std::string shutdown_drain = "2s";
  /// More NAME=VALUE entries for the worker's environment (e.g. PGAPPNAME,
  /// which names its database sessions in pg_stat_activity).
  std::vector<std::string> env;
  /// More TOML appended to the config ([http], [log] ...).
  std::string extra_toml;
};

/// Everything one fault test owns: a directory /tmp/aw_fault_PID_N_NAME
/// (logs, config files; kept when the test failed or AW_FAULT_KEEP_LOGS is
/// set, with the cluster's data removed), a migrated cluster with the `job_executions` table the
/// `record` kind writes to.
class fault_env {
public:
  explicit fault_env(const std::string& test_name);
  ~fault_env();
  fault_env(const fault_env&) = delete;
  fault_env& operator=(const fault_env&) = delete;

  pg_cluster& cluster() {
    return *cluster_;
  }
  std::string url() const {
    return cluster_->url();
  }
  const std::string& dir() const {
    return dir_;
  }

  /// Writes a worker config (TOML) and returns its path.
  std::string config(const worker_timings& t);

  /// `actor-worker --config CONFIG run`, logging to DIR/LABEL.err.
  std::unique_ptr<worker_process> start_worker(const std::string& label,
                                               const worker_timings& t);

  /// Runs a one-shot `actor-worker ARGS` to its end (killed after 60 s).
  command_result run(const std::vector<std::string>& args);

  /// `actor-worker enqueue ARGS...`; returns the new id (fails the test
  /// when the command fails).
  int64_t enqueue(const std::vector<std::string>& args);

private:
  std::string dir_;
  std::unique_ptr<pg_cluster> cluster_;
  int configs_ = 0;
};

} // namespace aw::fault
