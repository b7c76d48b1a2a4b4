#pragma once
// The actor-worker binary as a child process, for the suites that run it
// (cli_test, admin_cli_test): temporary files, a process in the background
// with its stdout and stderr in files, and a bounded run to the end.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg_fixture.hpp"

extern char** environ;

namespace aw::test {

using namespace std::chrono_literals;

inline std::string temp_path(const std::string& suffix) {
  static std::atomic<int> counter{0};
  return "/tmp/aw_cli_test_" + std::to_string(::getpid()) + "_"
         + std::to_string(counter++) + suffix;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// A temporary file with `text`, removed at scope exit.
struct temp_file {
  explicit temp_file(const std::string& text, const std::string& suffix = ".toml")
    : path(temp_path(suffix)) {
    std::ofstream{path} << text;
  }
  ~temp_file() {
    std::remove(path.c_str());
  }
  std::string path;
};

/// The binary running in the background (for `run`, which does not end on
/// its own), with stdout and stderr going to files.
class background_process {
public:
  background_process(const std::vector<std::string>& args,
                     const std::string& database_url)
    : out_(temp_path(".out")), err_(temp_path(".err")) {
    // Everything the child needs is built before fork(): after it, only
    // async-signal-safe calls.
    std::vector<std::string> argv_s{aw::test::binary_path()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string{*e}.rfind("DATABASE_URL=", 0) != 0)
        env_s.emplace_back(*e);
    env_s.push_back("DATABASE_URL=" + database_url);
    std::vector<char*> argv, envp;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int out_fd = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err_fd = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    BOOST_REQUIRE(out_fd >= 0 && err_fd >= 0);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(err_fd, STDERR_FILENO);
      ::close(out_fd);
      ::close(err_fd);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out_fd);
    ::close(err_fd);
  }

  ~background_process() {
    if (running())
      ::kill(pid_, SIGKILL);
    if (!exit_code_)
      ::waitpid(pid_, nullptr, 0);
    std::remove(out_.c_str());
    std::remove(err_.c_str());
  }

  pid_t pid() const {
    return pid_;
  }
  bool running() {
    if (exit_code_)
      return false;
    int status = 0;
    auto r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
      return false;
    }
    return true;
  }

  /// The exit code, or nothing if it is still running after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    aw::test::wait_until([this] { return !running(); }, timeout);
    return exit_code_;
  }

  void signal(int sig) {
    ::kill(pid_, sig);
  }

  std::string out() const {
    return slurp(out_);
  }

  std::string err() const {
    return slurp(err_);
  }

private:
  std::string out_;
  std::string err_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

/// Runs `actor-worker ARGS` to its end (killing it after a minute).
inline aw::test::command_result run_bounded(const std::vector<std::string>& args,
                                     const std::string& url) {
  background_process p{args, url};
  auto code = p.wait_exit(60s);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "the binary did not exit within 60 s");
  return {*code, p.out(), p.err()};
}

} // namespace aw::test
