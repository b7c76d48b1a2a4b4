#pragma once
// What app/command_handler.cpp's runner uses to start a child and to keep
// what it writes: the spawn (app/command_spawn.cpp) and the output buffers
// (app/command_output.cpp). Internal to aw_runtime: not installed.

#include <cstddef>
#include <optional>
#include <string>

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "actor_worker/config/config.hpp"

namespace aw::command_internal {

// -- file descriptors and signals (app/command_spawn.cpp) ----------------------

/// A pidfd for `pid` (-1 with errno where the kernel has none).
int open_pidfd(pid_t pid);

/// "SIGTERM", or "signal N" for one without a name.
std::string signal_name(int sig);

void set_nonblocking(int fd);

/// Closes `fd` if open and sets it to -1.
void close_fd(int& fd);

// -- the spawn (app/command_spawn.cpp) ------------------------------------------

/// A started child: its pid and the worker's ends of its pipes (blocking,
/// close-on-exec).
struct spawned_child {
  pid_t pid = -1;
  /// Its stdin, to write.
  int in = -1;
  /// Its stdout and stderr, to read.
  int out = -1;
  int err = -1;
};

/// Starts `cmd` (posix_spawnp, no shell) in a process group of its own,
/// with the default signal dispositions and an empty signal mask, its
/// environment plus `cmd.env` and, when not empty, AW_CALLBACK_ID =
/// `callback_id`. False with `error` set when it cannot start.
bool spawn_command(const command_kind_config& cmd,
                   const std::string& callback_id, spawned_child& child,
                   std::string& error);

// -- what a child writes (app/command_output.cpp) ------------------------------

/// The last `cap` bytes of a stream.
class tail_buffer {
public:
  explicit tail_buffer(size_t cap) : cap_(cap) {
    // nop
  }

  void append(const char* data, size_t n);

  /// The tail, trimmed, starting on a character boundary; "[...]" in front
  /// when the stream was longer.
  std::string str() const;

private:
  size_t cap_;
  std::string buf_;
  bool cut_ = false;
};

/// Splits stdout into lines and keeps the last outcome object; lines longer
/// than the bound are skipped without being held.
class outcome_scanner {
public:
  void append(const char* data, size_t n);

  /// The stream ended: its last line counts even without a newline.
  void finish() {
    end_line();
  }

  const std::optional<nlohmann::json>& last() const {
    return last_;
  }

private:
  void end_line();

  std::string line_;
  bool too_long_ = false;
  std::optional<nlohmann::json> last_;
};

} // namespace aw::command_internal
