#include "fault_fixture.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/results_collector.hpp>
#include <boost/test/unit_test.hpp>

extern char** environ;

using namespace std::chrono_literals;

namespace aw::fault {

namespace {

std::string env_or_fail(const char* name, const char* why) {
  auto env = std::getenv(name);
  if (env == nullptr || *env == '\0')
    BOOST_FAIL(std::string{name} + " is not set: " + why);
  return env;
}

int env_int(const char* name, int fallback) {
  auto env = std::getenv(name);
  return env != nullptr && *env != '\0' ? std::atoi(env) : fallback;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

/// The last `n` lines of `text`.
std::string tail(const std::string& text, size_t n) {
  size_t pos = text.size();
  for (size_t lines = 0; pos > 0 && lines <= n;) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
    ++lines;
  }
  return text.substr(pos);
}

bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

} // namespace

std::string binary_path() {
  return env_or_fail("AW_BINARY", "run the fault tests through ctest");
}

std::string pg_script() {
  return env_or_fail("AW_PG_SCRIPT",
                     "run the fault tests through ctest (scripts/pg.sh)");
}

bool current_test_failed() {
  auto id = boost::unit_test::framework::current_test_case().p_id;
  return !boost::unit_test::results_collector.results(id).passed();
}

bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout,
                std::chrono::milliseconds every) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      if (condition())
        return true;
    } catch (const std::exception&) {
      // The database is down, or the check raced a restart: not yet.
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(every);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// -- port_reservation ----------------------------------------------------------

port_reservation::port_reservation() {
  int first = env_int("AW_FAULT_PORT_FIRST", 25400);
  int last = env_int("AW_FAULT_PORT_LAST", 25499);
  for (int port = first; port <= last; ++port) {
    auto lock = "/tmp/aw_fault_port_" + std::to_string(port) + ".lock";
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
      continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      continue;
    }
    if (!port_free(port)) {
      ::close(fd);
      continue;
    }
    port_ = port;
    lock_fd_ = fd;
    return;
  }
  BOOST_FAIL("no free port in " << first << ".." << last
                                << " for a test PostgreSQL cluster");
}

port_reservation::~port_reservation() {
  if (lock_fd_ >= 0)
    ::close(lock_fd_); // releases the flock
}

// -- pg_cluster ----------------------------------------------------------------

pg_cluster::pg_cluster(const std::string& dir) : dir_(dir + "/pg") {
  start();
}

pg_cluster::pg_cluster(const std::string& dir, const std::string& name,
                       const pg_cluster& primary)
  : dir_(dir + "/" + name) {
  pg("standby " + shell_quote(dir_) + " " + std::to_string(port()) + " "
     + std::to_string(primary.port()));
  running_ = true;
}

pg_cluster::~pg_cluster() {
  try {
    if (current_test_failed())
      std::cerr << "---- tail of " << log_path() << "\n"
                << tail(slurp(log_path()), 30) << "----\n";
  } catch (...) {
  }
  try {
    stop();
  } catch (const std::exception& e) {
    std::cerr << "stopping the cluster in " << dir_ << " failed: " << e.what()
              << "\n";
  }
  // The data directory is large and owned by postgres: always removed.
  std::system(("rm -rf " + shell_quote(dir_ + "/data")).c_str());
}

void pg_cluster::pg(const std::string& args) {
  auto cmd = shell_quote(pg_script()) + " " + args + " >>"
             + shell_quote(dir_ + ".pg_sh.log") + " 2>&1";
  int status = std::system(cmd.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("`pg.sh " + args + "` failed (exit status "
                             + std::to_string(status) + "); see " + dir_
                             + ".pg_sh.log and " + log_path() + ":\n"
                             + tail(slurp(dir_ + ".pg_sh.log"), 20));
}

void pg_cluster::start() {
  pg("start " + shell_quote(dir_) + " " + std::to_string(port()));
  running_ = true;
}

void pg_cluster::stop() {
  running_ = false;
  pg("stop " + shell_quote(dir_));
}

void pg_cluster::restart() {
  stop();
  start();
}

void pg_cluster::crash() {
  running_ = false;
  pg("crash " + shell_quote(dir_));
}

void pg_cluster::promote() {
  pg("promote " + shell_quote(dir_));
}

std::string pg_cluster::url() const {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port())
         + "/postgres";
}

// -- db_session ----------------------------------------------------------------

pqxx::result db_session::query(const std::string& sql) {
  try {
    if (!conn_ || !conn_->is_open())
      conn_ = std::make_unique<pqxx::connection>(url_);
    pqxx::nontransaction tx{*conn_};
    return tx.exec(sql);
  } catch (...) {
    conn_.reset();
    throw;
  }
}

std::string db_session::describe(const std::string& sql) {
  try {
    return text(sql);
  } catch (const std::exception& e) {
    return std::string{"(unavailable: "} + e.what() + ")";
  }
}

std::string db_session::quote(const std::string& text) {
  if (!conn_ || !conn_->is_open())
    conn_ = std::make_unique<pqxx::connection>(url_);
  return conn_->quote(text);
}

int64_t db_session::scalar(const std::string& sql) {
  auto rows = query(sql);
  if (rows.empty())
    throw std::runtime_error("no row from: " + sql);
  return rows[0][0].is_null() ? 0 : rows[0][0].as<int64_t>();
}

std::string db_session::text(const std::string& sql) {
  auto rows = query(sql);
  if (rows.empty())
    throw std::runtime_error("no row from: " + sql);
  return rows[0][0].is_null() ? std::string{} : rows[0][0].as<std::string>();
}

// -- worker_process ------------------------------------------------------------

worker_process::worker_process(std::string label,
                               const std::vector<std::string>& args,
                               const std::string& database_url,
                               const std::string& log_dir,
                               const std::vector<std::string>& extra_env,
                               const std::string& program)
  : label_(std::move(label)),
    out_path_(log_dir + "/" + label_ + ".out"),
    err_path_(log_dir + "/" + label_ + ".err") {
  // Everything the child needs is built before fork(): after it, only
  // async-signal-safe calls.
  std::vector<std::string> argv_s{program.empty() ? binary_path() : program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string{*e}.rfind("DATABASE_URL=", 0) != 0)
      env_s.emplace_back(*e);
  env_s.push_back("DATABASE_URL=" + database_url);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_s)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  int out_fd = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BOOST_REQUIRE_MESSAGE(out_fd >= 0 && err_fd >= 0,
                        "cannot create the log files in " << log_dir);
  pid_t parent = ::getpid();
  pid_ = ::fork();
  BOOST_REQUIRE_MESSAGE(pid_ >= 0, "fork failed");
  if (pid_ == 0) {
    // Die with the test process, whatever kills it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    // The test process may have signals blocked; the worker sets its own.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
}

worker_process::~worker_process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  try {
    if (current_test_failed())
      std::cerr << "---- tail of " << err_path_ << " (worker " << label_
                << ", pid " << pid_ << ")\n"
                << tail(err(), 40) << "----\n";
  } catch (...) {
  }
}

bool worker_process::running() {
  if (exit_code_)
    return false;
  int status = 0;
  auto r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                   : 128 + WTERMSIG(status);
    return false;
  }
  return r == 0;
}

std::optional<int> worker_process::wait_exit(std::chrono::milliseconds timeout) {
  wait_until([this] { return !running(); }, timeout, 10ms);
  return exit_code_;
}

void worker_process::signal(int sig) {
  if (running())
    ::kill(pid_, sig);
}

void worker_process::kill9() {
  if (!running())
    return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_)
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                   : 128 + WTERMSIG(status);
}

// -- fault_env -----------------------------------------------------------------

namespace {

std::string make_dir(const std::string& test_name) {
  static std::atomic<int> counter{0};
  auto dir = "/tmp/aw_fault_" + std::to_string(::getpid()) + "_"
             + std::to_string(counter++) + "_" + test_name.substr(0, 40);
  std::system(("rm -rf " + shell_quote(dir)).c_str());
  BOOST_REQUIRE_MESSAGE(::mkdir(dir.c_str(), 0755) == 0,
                        "cannot create " << dir);
  return dir;
}

} // namespace

fault_env::fault_env(const std::string& test_name) : dir_(make_dir(test_name)) {
  cluster_ = std::make_unique<pg_cluster>(dir_);
  auto migrated = run({"migrate"});
  BOOST_REQUIRE_MESSAGE(migrated.exit_code == 0,
                        "actor-worker migrate failed: " << migrated.err);
  db_session db{url()};
  db.exec("CREATE TABLE job_executions ("
          " id bigserial PRIMARY KEY,"
          " job_id bigint NOT NULL,"
          " attempt integer NOT NULL,"
          " worker text NOT NULL,"
          " started_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
          " finished_at timestamptz)");
}

fault_env::~fault_env() {
  bool failed = false;
  try {
    failed = current_test_failed();
  } catch (...) {
  }
  cluster_.reset();
  auto keep = std::getenv("AW_FAULT_KEEP_LOGS");
  if (keep != nullptr && *keep != '\0')
    failed = true;
  if (failed)
    std::cerr << "fault test logs kept in " << dir_ << "\n";
  else
    std::system(("rm -rf " + shell_quote(dir_)).c_str());
}

std::string fault_env::config(const worker_timings& t) {
  auto path = dir_ + "/worker-" + std::to_string(configs_++) + ".toml";
  std::ofstream out{path};
  out << "[worker]\n"
      << "node = \"" << t.node << "\"\n"
      << "poll_interval = \"" << t.poll_interval << "\"\n"
      << "heartbeat_interval = \"" << t.heartbeat_interval << "\"\n"
      << "reclaim_window = \"" << t.reclaim_window << "\"\n"
      << "shutdown_drain = \"" << t.shutdown_drain << "\"\n"
      << "\n[queues.default]\n"
      << "concurrency = " << t.concurrency << "\n"
      << t.extra_toml;
  BOOST_REQUIRE_MESSAGE(out.good(), "cannot write " << path);
  return path;
}

std::unique_ptr<worker_process> fault_env::start_worker(const std::string& label,
                                                        const worker_timings& t) {
  auto cfg = config(t);
  return std::make_unique<worker_process>(
    label, std::vector<std::string>{"--config", cfg, "run"}, url(), dir_, t.env);
}

command_result fault_env::run(const std::vector<std::string>& args) {
  static std::atomic<int> counter{0};
  worker_process p{"cmd-" + std::to_string(counter++), args, url(), dir_};
  auto code = p.wait_exit(60s);
  BOOST_REQUIRE_MESSAGE(code.has_value(),
                        "`actor-worker " << args.at(0)
                                         << "` did not exit within 60 s");
  return {*code, p.out(), p.err()};
}

int64_t fault_env::enqueue(const std::vector<std::string>& args) {
  std::vector<std::string> full{"enqueue"};
  full.insert(full.end(), args.begin(), args.end());
  auto r = run(full);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0 && !r.out.empty(),
                        "enqueue failed (exit " << r.exit_code
                                                << "): " << r.err);
  return std::stoll(r.out);
}

} // namespace aw::fault
