// Command kinds ([kinds.NAME] command = [...]) run real /bin/sh children
// through the registry, without a database: exit codes, the stdout outcome
// protocol, signals and the kill grace, timeouts, huge outputs, and many
// children at once on one I/O thread.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <optional>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/toml_kinds.hpp"

namespace aw {
std::ostream& operator<<(std::ostream& out, outcome_kind k);
} // namespace aw

using namespace std::chrono_literals;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A scratch directory, removed at the end.
struct scratch_dir {
  scratch_dir() {
    char tmpl[] = "/tmp/aw_cmd_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~scratch_dir() {
    std::system(("rm -rf " + path).c_str());
  }
  std::string file(const std::string& name) const {
    return path + "/" + name;
  }
  std::string read(const std::string& name) const {
    std::ifstream in{file(name)};
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
  }
  std::string path;
};

aw::command_kind_config sh(const std::string& script) {
  aw::command_kind_config c;
  c.argv = {"/bin/sh", "-c", script};
  return c;
}

/// A registry with the command kind `cmd` registered as "job".
std::shared_ptr<aw::registry> registry_with(aw::command_kind_config cmd) {
  auto reg = std::make_shared<aw::registry>();
  aw::kind_config k;
  k.name = "job";
  k.where = "test.toml:1";
  k.command = std::move(cmd);
  aw::register_toml_kinds(*reg, {k});
  return reg;
}

aw::claimed_job make_job(const std::string& args = R"({"to": "ann"})") {
  aw::claimed_job job;
  job.id = 42;
  job.kind = "job";
  job.queue = "mail";
  job.args = args;
  job.attempt = 3;
  job.error_count = 1;
  job.metadata = R"({"tenant": "t1"})";
  return job;
}

aw::job_outcome run(aw::command_kind_config cmd,
                    const aw::cancellation_token& cancel = {}) {
  auto reg = registry_with(std::move(cmd));
  return reg->run(make_job(), cancel);
}

/// Runs `cmd`, cancelling it after `after`; returns the outcome and how
/// long the run took.
std::pair<aw::job_outcome, std::chrono::milliseconds>
run_cancelled(aw::command_kind_config cmd, std::chrono::milliseconds after) {
  aw::cancellation_token cancel;
  std::thread canceller{[&] {
    std::this_thread::sleep_for(after);
    cancel.cancel("deadline of 1s exceeded");
  }};
  auto start = std::chrono::steady_clock::now();
  auto out = run(std::move(cmd), cancel);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - start);
  canceller.join();
  return {out, took};
}

/// True while `pid` runs (a zombie does not: an orphan's zombie may wait
/// for a reaper that never comes in a container).
bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return false;
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat;
  std::getline(in, stat);
  auto paren = stat.rfind(')');
  return paren == std::string::npos || stat.size() < paren + 3
         || stat[paren + 2] != 'Z';
}

/// Waits up to 5 s for `pid` to end.
bool wait_gone(pid_t pid) {
  for (int i = 0; i < 250 && process_alive(pid); ++i)
    std::this_thread::sleep_for(20ms);
  return !process_alive(pid);
}

int threads_of_this_process() {
  int n = 0;
  if (auto dir = ::opendir("/proc/self/task")) {
    while (auto e = ::readdir(dir))
      n += e->d_name[0] != '.';
    ::closedir(dir);
  }
  return n;
}

int64_t status_kib(const std::string& field) {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::stoll(line.substr(field.size() + 1));
  return -1;
}

} // namespace

BOOST_AUTO_TEST_SUITE(command_handler_test)

BOOST_AUTO_TEST_CASE(exit_0_completes_and_the_job_arrives_on_stdin) {
  scratch_dir dir;
  auto out = run(sh("cat > " + dir.file("stdin")));
  BOOST_TEST(out.kind == aw::outcome_kind::completed);
  auto doc = nlohmann::json::parse(dir.read("stdin"));
  BOOST_TEST(doc.at("id") == 42);
  BOOST_TEST(doc.at("kind") == "job");
  BOOST_TEST(doc.at("queue") == "mail");
  BOOST_TEST(doc.at("args") == nlohmann::json::parse(R"({"to": "ann"})"));
  BOOST_TEST(doc.at("metadata") == nlohmann::json::parse(R"({"tenant": "t1"})"));
  BOOST_TEST(doc.at("attempt") == 2); // error_count + 1
  BOOST_TEST(doc.at("error_count") == 1);
  BOOST_TEST(doc.at("run") == 3);
}

BOOST_AUTO_TEST_CASE(a_child_that_never_reads_stdin_still_completes) {
  // 4 MB of args: more than a pipe holds, and nobody reads them.
  std::string big(4 << 20, 'x');
  auto reg = registry_with(sh("exec 0<&-; exit 0"));
  auto out = reg->run(make_job(R"({"blob": ")" + big + "\"}"), {});
  BOOST_TEST(out.kind == aw::outcome_kind::completed);
}

BOOST_AUTO_TEST_CASE(exit_75_retries_with_the_end_of_stderr) {
  auto out = run(sh("echo 'connecting...' >&2; echo 'smtp: try later' >&2; "
                    "exit 75"));
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, "exited with code 75 (EX_TEMPFAIL)"),
             out.message);
  BOOST_TEST(contains(out.message, "smtp: try later"), out.message);
}

BOOST_AUTO_TEST_CASE(exit_65_dead_letters) {
  auto out = run(sh("echo 'bad address' >&2; exit 65"));
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(out.message, "exited with code 65 (EX_DATAERR): bad "
                                   "address"),
             out.message);
}

BOOST_AUTO_TEST_CASE(other_exit_codes_retry_and_say_so) {
  auto out = run(sh("exit 3"));
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(out.message == "the command exited with code 3 (no output on "
                            "stderr)");
}

BOOST_AUTO_TEST_CASE(stderr_is_bounded_to_its_end) {
  // 1 MB of stderr: the message keeps the last few KB, marked as cut.
  auto out = run(sh("i=0; while [ $i -lt 20000 ]; do "
                    "echo \"line $i of a long traceback ......................."
                    "\" >&2; i=$((i+1)); done; echo 'ValueError: the end' >&2; "
                    "exit 1"));
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, ": [...]"), out.message.substr(0, 200));
  BOOST_TEST(contains(out.message, "ValueError: the end"));
  BOOST_TEST(out.message.size() <= 4096u);
}

BOOST_AUTO_TEST_CASE(a_stdout_outcome_line_returns_any_outcome) {
  auto line = [](const std::string& json) {
    return run(sh("echo 'working'; echo '" + json + "'; echo 'bye'"));
  };
  auto snooze = line(R"({"outcome": "snooze", "for": "1m"})");
  BOOST_TEST(snooze.kind == aw::outcome_kind::snoozed);
  BOOST_TEST(snooze.delay_ms == 60000);
  auto retry = line(R"({"outcome": "retry", "after": 30, "message": "busy"})");
  BOOST_TEST(retry.kind == aw::outcome_kind::retry_after);
  BOOST_TEST(retry.delay_ms == 30000);
  BOOST_TEST(retry.message == "busy");
  auto backoff = line(R"({"outcome": "retry", "message": "flaky"})");
  BOOST_TEST(backoff.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(backoff.message == "flaky");
  auto fail = line(R"({"outcome": "fail", "message": "no such user"})");
  BOOST_TEST(fail.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(fail.message == "no such user");
  auto cancel = line(R"({"outcome": "cancel", "reason": "unsubscribed"})");
  BOOST_TEST(cancel.kind == aw::outcome_kind::cancelled);
  BOOST_TEST(cancel.message == "unsubscribed");
  auto wait = line(R"({"outcome": "wait_for_callback", "timeout": "2h"})");
  BOOST_TEST(wait.kind == aw::outcome_kind::waiting_callback);
  BOOST_TEST(wait.delay_ms == 2 * 3600 * 1000);
  auto done = line(R"({"outcome": "completed"})");
  BOOST_TEST(done.kind == aw::outcome_kind::completed);
}

BOOST_AUTO_TEST_CASE(the_last_outcome_line_wins_even_without_a_newline) {
  auto out = run(sh(R"(echo '{"outcome": "cancel"}'; echo '{"other": 1}'; )"
                    R"(printf '{"outcome": "snooze", "for": "5s"}')"));
  BOOST_TEST(out.kind == aw::outcome_kind::snoozed);
  BOOST_TEST(out.delay_ms == 5000);
}

BOOST_AUTO_TEST_CASE(a_malformed_outcome_line_fails_terminally) {
  auto out = run(sh(R"(echo '{"outcome": "snooze", "for": "soon"}')"));
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(out.message, "invalid outcome object: \"for\""),
             out.message);
  auto unknown = run(sh(R"(echo '{"outcome": "explode"}')"));
  BOOST_TEST(unknown.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(unknown.message, "unknown outcome \"explode\""));
}

BOOST_AUTO_TEST_CASE(an_outcome_line_counts_only_on_exit_0) {
  auto out = run(sh(R"(echo '{"outcome": "completed"}'; exit 75)"));
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
}

BOOST_AUTO_TEST_CASE(a_child_killed_by_a_signal_is_retried) {
  auto out = run(sh("echo 'about to crash' >&2; kill -SEGV $$"));
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, "was killed by SIGSEGV"), out.message);
  BOOST_TEST(contains(out.message, "about to crash"), out.message);
}

BOOST_AUTO_TEST_CASE(a_missing_executable_is_retried_with_the_reason) {
  aw::command_kind_config c;
  c.argv = {"/nonexistent/send.py", "x"};
  auto out = run(c);
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(out.message == "cannot run /nonexistent/send.py: spawn: No such "
                            "file or directory",
             out.message);
  c.argv = {"no-such-program-anywhere-on-path"};
  auto path = run(c);
  BOOST_TEST(path.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(path.message, "No such file or directory"));
}

BOOST_AUTO_TEST_CASE(env_and_cwd_reach_the_child) {
  scratch_dir dir;
  auto c = sh("echo \"$GREETING $HOME\" > out; pwd >> out");
  c.cwd = dir.path;
  c.env = {{"GREETING", "hello"}, {"HOME", "/elsewhere"}};
  auto out = run(c);
  BOOST_TEST(out.kind == aw::outcome_kind::completed);
  BOOST_TEST(dir.read("out") == "hello /elsewhere\n" + dir.path + "\n");
}

BOOST_AUTO_TEST_CASE(cancellation_sends_sigterm_to_the_process_group) {
  // The worker blocks SIGTERM on its threads (it takes signals with
  // sigtimedwait): the child must not inherit that mask. The runner's
  // thread starts from this one, mask included.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &term, &old);
  scratch_dir dir;
  // A grandchild in the same group is stopped too.
  auto c = sh("sleep 30 & echo $! > " + dir.file("grandchild") + "; wait");
  c.kill_grace = 20s;
  auto [out, took] = run_cancelled(c, 300ms);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, "stopped (deadline of 1s exceeded; sent "
                                   "SIGTERM): the command was killed by "
                                   "SIGTERM"),
             out.message);
  BOOST_TEST((took < 5s));
  auto grandchild = std::stoi(dir.read("grandchild"));
  BOOST_TEST(wait_gone(grandchild));
}

BOOST_AUTO_TEST_CASE(a_grandchild_in_the_group_dies_when_the_command_exits_0) {
  scratch_dir dir;
  // The command exits 0 at once, leaving a sleep in its process group
  // (its output elsewhere, so no pipe stays open).
  auto out = run(sh("sleep 30 >/dev/null 2>&1 </dev/null & echo $! > "
                    + dir.file("grandchild")));
  BOOST_TEST(out.kind == aw::outcome_kind::completed, out.message);
  auto grandchild = std::stoi(dir.read("grandchild"));
  bool gone = wait_gone(grandchild);
  BOOST_TEST(gone);
  if (!gone)
    ::kill(grandchild, SIGKILL);
}

BOOST_AUTO_TEST_CASE(a_child_ignoring_sigterm_gets_sigkill_after_the_grace) {
  auto c = sh("trap '' TERM; echo ignoring >&2; sleep 30");
  c.kill_grace = 700ms;
  auto [out, took] = run_cancelled(c, 300ms);
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, "sent SIGTERM, then SIGKILL after 700ms): "
                                   "the command was killed by SIGKILL"),
             out.message);
  BOOST_TEST(contains(out.message, "ignoring"), out.message);
  BOOST_TEST((took >= 900ms));
  BOOST_TEST((took < 5s));
}

BOOST_AUTO_TEST_CASE(the_kind_timeout_stops_the_child_and_retries) {
  auto c = sh("sleep 30");
  c.timeout = 300ms;
  c.kill_grace = 5s;
  auto start = std::chrono::steady_clock::now();
  auto out = run(c);
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, "stopped (timed out after 300ms; sent "
                                   "SIGTERM): the command was killed by "
                                   "SIGTERM"),
             out.message);
  BOOST_TEST((took >= 300ms && took < 3s));
}

BOOST_AUTO_TEST_CASE(fifty_megabytes_of_output_keep_memory_bounded) {
  // 50 MB of lines on stdout, 50 MB on stderr, then an outcome line.
  std::ofstream{"/proc/self/clear_refs"} << "5"; // reset the peak RSS
  auto before = status_kib("VmHWM");
  auto start = std::chrono::steady_clock::now();
  auto out = run(sh("yes 'some output line' | head -c 52428800; "
                    "yes 'some error line' | head -c 52428800 >&2; "
                    // head cut the last line: end it first
                    R"(echo; echo '{"outcome": "snooze", "for": "2s"}')"));
  auto took = std::chrono::steady_clock::now() - start;
  auto grew = status_kib("VmHWM") - before;
  BOOST_TEST_MESSAGE("100 MB of output in "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms; peak RSS grew by " << grew << " KiB");
  BOOST_TEST(out.kind == aw::outcome_kind::snoozed);
  BOOST_TEST(out.delay_ms == 2000);
  BOOST_TEST(grew < 16 * 1024);
}

BOOST_AUTO_TEST_CASE(an_endless_line_is_skipped_not_held) {
  // 50 MB without a newline: never an outcome, never in memory.
  std::ofstream{"/proc/self/clear_refs"} << "5";
  auto before = status_kib("VmHWM");
  auto out = run(sh("head -c 52428800 /dev/zero | tr '\\0' '{'; echo; "
                    R"(echo '{"outcome": "cancel", "reason": "ok"}')"));
  BOOST_TEST(out.kind == aw::outcome_kind::cancelled);
  BOOST_TEST(status_kib("VmHWM") - before < 16 * 1024);
}

BOOST_AUTO_TEST_CASE(hundreds_of_children_run_on_one_thread) {
  auto reg = registry_with(sh("sleep 1; echo '{\"outcome\": \"completed\"}'"));
  // The I/O thread starts with the registration.
  auto threads = threads_of_this_process();
  constexpr int n = 300;
  std::mutex mtx;
  std::condition_variable cv;
  int completed = 0, failed = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto job = make_job();
    job.id = i + 1;
    aw::async_context ctx;
    reg->start(job, ctx, [&](aw::job_outcome o) {
      std::lock_guard<std::mutex> guard{mtx};
      ++(o.kind == aw::outcome_kind::completed ? completed : failed);
      if (o.kind != aw::outcome_kind::completed)
        BOOST_TEST_MESSAGE("failed: " << o.message);
      cv.notify_all();
    });
  }
  auto peak_threads = threads_of_this_process();
  std::unique_lock<std::mutex> guard{mtx};
  BOOST_REQUIRE(cv.wait_for(guard, 60s, [&] { return completed + failed == n; }));
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST_MESSAGE(n << " children of `sleep 1` in "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << " ms, threads " << threads << " -> " << peak_threads);
  BOOST_TEST(completed == n);
  BOOST_TEST(peak_threads == threads);
  BOOST_TEST((took < 20s));
}

BOOST_AUTO_TEST_CASE(destroying_the_registry_stops_running_children) {
  scratch_dir dir;
  auto reg = registry_with(sh("echo $$ > " + dir.file("pid") + "; sleep 30"));
  std::optional<aw::job_outcome> result;
  std::mutex mtx;
  reg->start(make_job(), aw::async_context{}, [&](aw::job_outcome o) {
    std::lock_guard<std::mutex> guard{mtx};
    result = o;
  });
  for (int i = 0; i < 100 && dir.read("pid").empty(); ++i)
    std::this_thread::sleep_for(20ms);
  auto pid = std::stoi(dir.read("pid"));
  BOOST_TEST(process_alive(pid));
  reg.reset();
  BOOST_TEST(!process_alive(pid));
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST(contains(result->message, "the worker stopped"));
}

BOOST_AUTO_TEST_SUITE_END()
