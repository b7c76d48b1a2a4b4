#include "actor_worker/actors/job_log.hpp"

namespace aw {

namespace {

thread_local const job_ref* current = nullptr;

} // namespace

const job_ref* current_job() noexcept {
  return current;
}

job_log_scope::job_log_scope(const job_ref& job) noexcept : previous_(current) {
  current = &job;
}

job_log_scope::~job_log_scope() {
  current = previous_;
}

} // namespace aw
