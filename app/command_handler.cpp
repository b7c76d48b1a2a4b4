#include "actor_worker/app/command_handler.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "actor_worker/app/internal/command_child.hpp"
#include "actor_worker/app/job_protocol.hpp"
#include "actor_worker/messages/printable.hpp"

namespace aw {

using namespace command_internal;

namespace {

using clock_type = std::chrono::steady_clock;

/// How often children without a pidfd are checked with waitpid(WNOHANG).
constexpr std::chrono::milliseconds reap_poll{50};

/// Bytes read from one pipe per wake-up before the others get their turn.
constexpr size_t read_chunk = 64 * 1024;
constexpr int reads_per_turn = 16;

/// Reads of a pipe after its child exited: what it wrote before is in the
/// pipe (at most its capacity, 64 KiB by default, 1 MiB at most); a
/// grandchild still writing is not waited for.
constexpr int reads_after_exit = 32;

/// What epoll reports on, packed into its 64-bit user data.
enum class source : uint64_t { wake = 0, exit = 1, in = 2, out = 3, err = 4 };

uint64_t tag(uint64_t id, source s) {
  return (id << 3) | static_cast<uint64_t>(s);
}

} // namespace

struct command_runner::impl : std::enable_shared_from_this<impl> {
  /// One running child.
  struct child {
    child(uint64_t id, int64_t job_id,
          std::shared_ptr<const command_kind_config> cmd, std::string input,
          job_promise done, std::string callback_id)
      : id(id), job_id(job_id), cmd(std::move(cmd)), done(std::move(done)),
        input(std::move(input)), callback_id(std::move(callback_id)) {
      // nop
    }

    uint64_t id;
    int64_t job_id;
    std::shared_ptr<const command_kind_config> cmd;
    job_promise done;
    pid_t pid = -1;
    int pidfd = -1;
    int in = -1;
    int out = -1;
    int err = -1;
    std::string input;
    /// The run's callback id (AW_CALLBACK_ID), registered before it
    /// started; empty if none.
    std::string callback_id;
    size_t written = 0;
    outcome_scanner stdout_scan;
    tail_buffer stderr_tail{defaults::command_stderr_tail};
    clock_type::time_point started;
    /// Why it is being stopped ("" while not): a cancellation, the timeout
    /// or the worker's shutdown.
    std::string stop_reason;
    /// SIGKILL was sent.
    bool killed = false;
  };

  impl() {
    epfd = ::epoll_create1(EPOLL_CLOEXEC);
    wakefd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epfd < 0 || wakefd < 0)
      throw std::system_error(errno, std::generic_category(),
                              "command runner: epoll/eventfd");
    add_fd(wakefd, EPOLLIN, tag(0, source::wake));
  }

  ~impl() {
    close_fd(wakefd);
    close_fd(epfd);
  }

  // -- called from any thread ---------------------------------------------------

  /// Runs `fn` on the I/O thread.
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      inbox.push_back(std::move(fn));
    }
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakefd, &one, sizeof(one));
  }

  // -- the I/O thread ----------------------------------------------------------

  void add_fd(int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
  }

  void loop() {
    // A write to a stdin whose reader is gone fails with EPIPE instead of
    // killing the worker: SIGPIPE stays blocked (and pending) on this
    // thread. Children get an empty mask (see spawn).
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
    std::vector<epoll_event> events(256);
    for (;;) {
      run_inbox();
      if (stopping && children.empty())
        return;
      auto n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()),
                            wait_ms());
      for (int i = 0; i < n; ++i) {
        auto data = events[i].data.u64;
        auto s = static_cast<source>(data & 7);
        if (s == source::wake) {
          uint64_t ticks;
          [[maybe_unused]] auto r = ::read(wakefd, &ticks, sizeof(ticks));
          continue;
        }
        auto it = children.find(data >> 3);
        if (it == children.end())
          continue;
        auto& c = *it->second;
        switch (s) {
          case source::exit:
            reap(c);
            break;
          case source::in:
            write_input(c);
            break;
          case source::out:
          case source::err:
            read_pipe(c, s == source::out);
            break;
          default:
            break;
        }
      }
      fire_timers();
    }
  }

  void run_inbox() {
    std::vector<std::function<void()>> work;
    {
      std::lock_guard<std::mutex> guard{mtx};
      work.swap(inbox);
    }
    for (auto& fn : work)
      fn();
  }

  /// Milliseconds to the next timer (-1: none).
  int wait_ms() {
    auto now = clock_type::now();
    std::optional<clock_type::time_point> next;
    if (!timers.empty())
      next = std::get<0>(*timers.begin());
    if (without_pidfd > 0 && (!next || *next > now + reap_poll))
      next = now + reap_poll;
    if (!next)
      return -1;
    if (*next <= now)
      return 0;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*next - now)
                .count();
    return static_cast<int>(std::min<int64_t>(ms + 1, 60'000));
  }

  void fire_timers() {
    auto now = clock_type::now();
    while (!timers.empty() && std::get<0>(*timers.begin()) <= now) {
      auto [at, id, what] = *timers.begin();
      timers.erase(timers.begin());
      auto it = children.find(id);
      if (it == children.end())
        continue;
      auto& c = *it->second;
      if (what == timer::timeout) {
        terminate(c, "timed out after " + format_duration(c.cmd->timeout));
      } else if (!c.killed) {
        spdlog::warn("job {}: its command still runs {} after SIGTERM; "
                     "sending SIGKILL to its process group",
                     c.job_id, format_duration(c.cmd->kill_grace));
        signal_group(c, SIGKILL);
        c.killed = true;
      }
    }
    if (without_pidfd > 0) {
      std::vector<child*> polled;
      for (auto& [id, c] : children)
        if (c->pidfd < 0)
          polled.push_back(c.get());
      for (auto* c : polled)
        reap(*c);
    }
  }

  void signal_group(child& c, int sig) {
    // The child leads its own group; one that left it (setsid) still gets
    // the signal itself.
    if (::kill(-c.pid, sig) != 0 && errno == ESRCH)
      ::kill(c.pid, sig);
  }

  /// Asks the child to stop (SIGTERM) and arms the SIGKILL.
  void terminate(child& c, std::string why) {
    if (!c.stop_reason.empty())
      return;
    c.stop_reason = std::move(why);
    signal_group(c, SIGTERM);
    timers.emplace(clock_type::now() + c.cmd->kill_grace, c.id, timer::kill);
  }

  void start(std::shared_ptr<child> c) {
    if (stopping) {
      c->done.fail("the worker is stopping");
      return;
    }
    std::string error;
    if (!spawn(*c, error)) {
      c->done.fail("cannot run " + printable(c->cmd->argv.front()) + ": "
                   + error);
      return;
    }
    c->started = clock_type::now();
    if (c->cmd->timeout.count() > 0)
      timers.emplace(c->started + c->cmd->timeout, c->id, timer::timeout);
    auto& ref = *c;
    children.emplace(c->id, std::move(c));
    count.store(children.size());
    write_input(ref);
    if (ref.in >= 0)
      add_fd(ref.in, EPOLLOUT, tag(ref.id, source::in));
  }

  bool spawn(child& c, std::string& error) {
    spawned_child s;
    if (!spawn_command(*c.cmd, c.callback_id, s, error))
      return false;
    c.pid = s.pid;
    c.in = s.in;
    c.out = s.out;
    c.err = s.err;
    set_nonblocking(c.in);
    set_nonblocking(c.out);
    set_nonblocking(c.err);
    add_fd(c.out, EPOLLIN, tag(c.id, source::out));
    add_fd(c.err, EPOLLIN, tag(c.id, source::err));
    c.pidfd = open_pidfd(c.pid);
    if (c.pidfd >= 0) {
      ::fcntl(c.pidfd, F_SETFD, FD_CLOEXEC);
      add_fd(c.pidfd, EPOLLIN, tag(c.id, source::exit));
    } else {
      ++without_pidfd;
    }
    return true;
  }
  void write_input(child& c) {
    while (c.in >= 0 && c.written < c.input.size()) {
      auto n = ::write(c.in, c.input.data() + c.written,
                       c.input.size() - c.written);
      if (n > 0) {
        c.written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      // EPIPE: the child does not read its stdin (closed it, or exited).
      if (errno == EPIPE) {
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        timespec zero{0, 0};
        ::sigtimedwait(&pipe_set, nullptr, &zero);
      }
      break;
    }
    // All written (or no reader): EOF on the child's stdin.
    close_fd(c.in);
    c.input.clear();
    c.input.shrink_to_fit();
  }

  /// Reads what the pipe holds, at most `reads` chunks.
  void read_pipe(child& c, bool is_stdout, int reads = reads_per_turn) {
    int& fd = is_stdout ? c.out : c.err;
    char buf[read_chunk];
    for (int turn = 0; fd >= 0 && turn < reads; ++turn) {
      auto n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        if (is_stdout)
          c.stdout_scan.append(buf, static_cast<size_t>(n));
        else
          c.stderr_tail.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      // EOF or an error: the stream is over.
      close_fd(fd);
    }
  }

  /// The child may have exited: reaps it and ends its run.
  void reap(child& c) {
    // Whatever the child left running in its group (a grandchild it
    // started in the background) dies with it. Looked at without reaping
    // first (WNOWAIT): while the child is a zombie its pid, the group's
    // id, cannot be taken by another process.
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(c.pid), &info,
                 WEXITED | WNOHANG | WNOWAIT) == 0
        && info.si_pid == c.pid)
      ::kill(-c.pid, SIGKILL);
    int status = 0;
    auto r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == 0)
      return;
    bool known = r == c.pid;
    // What it wrote before it exited is in the pipes now; a grandchild
    // that still holds them open is not waited for.
    read_pipe(c, true, reads_after_exit);
    read_pipe(c, false, reads_after_exit);
    c.stdout_scan.finish();
    end_run(c, known, status);
    if (c.pidfd < 0)
      --without_pidfd;
    for (int* fd : {&c.pidfd, &c.in, &c.out, &c.err})
      close_fd(*fd);
    auto keep = children.at(c.id); // `c` lives until this returns
    children.erase(c.id);
    count.store(children.size());
  }

  void end_run(child& c, bool known, int status) {
    auto& done = c.done;
    auto tail = c.stderr_tail.str();
    auto with_stderr = [&](std::string message) {
      return message + (tail.empty() ? " (no output on stderr)" : ": " + tail);
    };
    std::string how;
    if (!known)
      how = "ended (its exit status was lost: is SIGCHLD ignored?)";
    else if (WIFEXITED(status))
      how = "exited with code " + std::to_string(WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
      how = std::string{"was killed by "} + signal_name(WTERMSIG(status))
            + (WCOREDUMP(status) ? " (core dumped)" : "");
    else
      how = "ended with status " + std::to_string(status);
    bool exited_0 = known && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!c.stop_reason.empty() && !exited_0) {
      auto sent = c.killed ? "sent SIGTERM, then SIGKILL after "
                               + format_duration(c.cmd->kill_grace)
                           : std::string{"sent SIGTERM"};
      done.fail(with_stderr("stopped (" + c.stop_reason + "; " + sent
                            + "): the command " + how));
      return;
    }
    if (exited_0) {
      if (auto& o = c.stdout_scan.last())
        finish_with_outcome_object(done, *o);
      else
        done.complete();
      return;
    }
    if (known && WIFEXITED(status) && WEXITSTATUS(status) == 65) {
      done.fail_terminal(with_stderr("the command " + how + " (EX_DATAERR)"));
      return;
    }
    if (known && WIFEXITED(status) && WEXITSTATUS(status) == 75) {
      done.fail(with_stderr("the command " + how + " (EX_TEMPFAIL)"));
      return;
    }
    done.fail(with_stderr("the command " + how));
  }

  /// The worker stops: every child is asked to stop.
  void stop_all() {
    stopping = true;
    for (auto& [id, c] : children)
      terminate(*c, "the worker stopped");
  }

  mutable std::mutex mtx;
  std::vector<std::function<void()>> inbox;
  int epfd = -1;
  int wakefd = -1;
  bool stopping = false;
  uint64_t next_id = 0;
  std::atomic<size_t> count{0};
  std::unordered_map<uint64_t, std::shared_ptr<child>> children;
  /// What a timer does when it fires.
  enum class timer : uint8_t { timeout, kill };
  std::set<std::tuple<clock_type::time_point, uint64_t, timer>> timers;
  int without_pidfd = 0;
  std::thread thread;
};

command_runner::command_runner() : impl_(std::make_shared<impl>()) {
  impl_->thread = std::thread{[i = impl_.get()] { i->loop(); }};
}

command_runner::~command_runner() {
  impl_->post([i = impl_.get()] { i->stop_all(); });
  impl_->thread.join();
}

void command_runner::start(std::shared_ptr<const command_kind_config> cmd,
                           int64_t job_id, std::string input, job_promise done,
                           const cancellation_token& cancel,
                           std::string callback_id) {
  // The id is taken here so the cancel callback can name the child; the
  // I/O thread runs this start before any cancel posted after it.
  uint64_t id;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    id = ++impl_->next_id;
  }
  auto c = std::make_shared<impl::child>(id, job_id, std::move(cmd),
                                         std::move(input), std::move(done),
                                         std::move(callback_id));
  impl_->post([i = impl_.get(), c = std::move(c)] { i->start(c); });
  std::weak_ptr<impl> weak = impl_;
  cancel.on_cancel([weak, id](const std::string& why) {
    if (auto i = weak.lock())
      i->post([i = i.get(), id, why] {
        auto it = i->children.find(id);
        if (it != i->children.end())
          i->terminate(*it->second, why);
      });
  });
}

size_t command_runner::running() const {
  return impl_->count.load();
}

registry::raw_async_handler
command_handler(std::shared_ptr<command_runner> runner,
                command_kind_config cmd) {
  auto shared = std::make_shared<const command_kind_config>(std::move(cmd));
  return [runner = std::move(runner), shared](const nlohmann::json& args,
                                              const async_context& ctx,
                                              job_promise done) {
    runner->start(shared, ctx.id, job_document(args, ctx), std::move(done),
                  ctx.cancel, ctx.callback_id());
  };
}

} // namespace aw
