#include "actor_worker/messages/async.hpp"

#include <atomic>

#include "actor_worker/messages/outcome.hpp"

namespace aw {

struct job_promise::state {
  std::atomic<bool> done{false};
  int64_t job_id = 0;
  std::string kind;
  sink deliver;
};

job_promise::job_promise(int64_t job_id, std::string kind, sink deliver)
  : state_(std::make_shared<state>()) {
  state_->job_id = job_id;
  state_->kind = std::move(kind);
  state_->deliver = std::move(deliver);
}

void job_promise::deliver(job_outcome out) const {
  if (!state_->done.exchange(true))
    state_->deliver(std::move(out));
}

void job_promise::finish(const outcome& o) const {
  if (!done())
    deliver(outcome_of(state_->job_id, state_->kind, o));
}

void job_promise::fail(const std::string& message) const {
  if (!done())
    deliver(failure_of(state_->job_id, outcome_kind::retryable_failure,
                              message));
}

void job_promise::fail_terminal(const std::string& message) const {
  if (!done())
    deliver(failure_of(state_->job_id, outcome_kind::terminal_failure,
                              message));
}

void job_promise::fail(std::exception_ptr e) const {
  if (!done())
    deliver(outcome_of_exception(state_->job_id, state_->kind, e));
}

bool job_promise::done() const {
  return state_->done.load();
}

} // namespace aw
