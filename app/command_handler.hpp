#pragma once
// Job kinds run as child processes: `[kinds.NAME] command = [...]`.
//
// Each run spawns the command (posix_spawnp, no shell) in a process group
// of its own, with the default signal dispositions and an empty signal
// mask whatever the worker's, writes the job document (app/job_protocol.hpp)
// to its stdin and closes it, and maps how it ended to an outcome (a kind
// with `callback_timeout` also finds its run's callback id in the
// environment variable AW_CALLBACK_ID):
//
//   exit 0                 completed, or the outcome object on the last
//                          stdout line that holds one
//   exit 75 (EX_TEMPFAIL)  retryable failure
//   exit 65 (EX_DATAERR)   terminal failure: dead-lettered
//   other exit, killed by a signal, cannot start
//                          retryable failure
//
// A failure's message is the end of the child's stderr
// (defaults::command_stderr_tail bytes). Cancellation (deadline, lost
// lease, shutdown) and the kind's `timeout` send SIGTERM to the process
// group, then SIGKILL after `kill_grace`.
//
// Threading: one I/O thread per command_runner serves every child of every
// command kind. It waits in epoll on the children's pipes and on a pidfd
// per child (so it learns of an exit without SIGCHLD; where pidfd_open is
// unavailable it polls waitpid(WNOHANG) every 50 ms), writes stdin without
// blocking, and keeps reading stdout and stderr to their end: the last
// stdout line of up to defaults::command_outcome_line_max bytes and the
// tail of stderr are all it keeps, so a child writing gigabytes neither
// fills the memory nor blocks on a full pipe. A run holds no thread and
// three file descriptors (four while its stdin is being written).

#include <memory>
#include <string>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/config/config.hpp"

namespace aw {

/// Runs the children of command kinds on one I/O thread.
class command_runner {
public:
  command_runner();

  /// Stops: children still running get SIGTERM, then SIGKILL after their
  /// kill_grace, and are reaped; their runs fail ("the worker stopped").
  ~command_runner();

  command_runner(const command_runner&) = delete;
  command_runner& operator=(const command_runner&) = delete;

  /// Starts `cmd` for job `job_id` with `input` on its stdin; `done`
  /// receives the outcome. `cancel` stops the child (SIGTERM, then SIGKILL
  /// after the grace). `callback_id`, when not empty, is the run's
  /// registered callback id, in the child's AW_CALLBACK_ID.
  void start(std::shared_ptr<const command_kind_config> cmd, int64_t job_id,
             std::string input, job_promise done,
             const cancellation_token& cancel, std::string callback_id = {});

  /// Children running now.
  size_t running() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

/// An asynchronous handler that runs `cmd` on `runner` for each job.
registry::raw_async_handler
command_handler(std::shared_ptr<command_runner> runner,
                command_kind_config cmd);

} // namespace aw
