// How the runner starts a command kind's child (posix_spawnp, no shell),
// and the small file-descriptor helpers it shares with the runner.

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "actor_worker/app/internal/command_child.hpp"
#include "actor_worker/messages/printable.hpp"

extern char** environ;

namespace aw::command_internal {

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void) pid;
  errno = ENOSYS;
  return -1;
#endif
}

std::string signal_name(int sig) {
  if (auto abbrev = ::sigabbrev_np(sig))
    return std::string{"SIG"} + abbrev;
  return "signal " + std::to_string(sig);
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

bool spawn_command(const command_kind_config& cmd,
                   const std::string& callback_id, spawned_child& child,
                   std::string& error) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto fail = [&](int code, const char* what) {
    error = std::string{what} + ": " + std::strerror(code);
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]})
      close_fd(*fd);
    return false;
  };
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0
      || ::pipe2(err, O_CLOEXEC) != 0)
    return fail(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  if (!cmd.cwd.empty())
    posix_spawn_file_actions_addchdir_np(&actions, cmd.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP
                                    | POSIX_SPAWN_SETSIGMASK
                                    | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  // The worker blocks SIGTERM and SIGINT (it takes them synchronously)
  // and this thread SIGPIPE: a child must not inherit that.
  sigset_t none, all;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&all);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaddset(&all, sig);
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<char*> argv;
  for (auto& a : cmd.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  char** env = environ;
  auto vars = cmd.env;
  if (!callback_id.empty())
    vars.emplace_back("AW_CALLBACK_ID", callback_id);
  if (!vars.empty()) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry{*e};
      auto name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (auto& [k, v] : vars)
        replaced = replaced || k == name;
      if (!replaced)
        env_strings.push_back(std::move(entry));
    }
    for (auto& [k, v] : vars)
      env_strings.push_back(k + "=" + v);
    for (auto& s : env_strings)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    env = envp.data();
  }
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  if (rc != 0) {
    auto what = cmd.cwd.empty()
                  ? std::string{"spawn"}
                  : "spawn (in " + printable(cmd.cwd) + ")";
    return fail(rc, what.c_str());
  }
  child.pid = pid;
  child.in = in[1];
  child.out = out[0];
  child.err = err[0];
  return true;
}

} // namespace aw::command_internal
