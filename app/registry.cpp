#include "app/registry.hpp"

#include <algorithm>

namespace aw {

registry& registry::add_raw(const std::string& kind, raw_handler fn) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  handlers_[kind] = std::move(fn);
  return *this;
}

bool registry::contains(const std::string& kind) const {
  return handlers_.count(kind) > 0;
}

std::vector<std::string> registry::kinds() const {
  std::vector<std::string> out;
  for (auto& [kind, fn] : handlers_)
    out.push_back(kind);
  std::sort(out.begin(), out.end());
  return out;
}

terminal_error registry::malformed_args_error(const std::string& kind,
                                              const std::string& why) {
  return terminal_error("malformed args for job kind '" + kind + "': " + why);
}

job_outcome registry::run(const claimed_job& job) const {
  job_outcome out;
  out.job_id = job.id;
  auto fail = [&](outcome_kind kind, std::string message) {
    out.kind = kind;
    out.message = std::move(message);
    return out;
  };
  auto i = handlers_.find(job.kind);
  if (i == handlers_.end())
    return fail(outcome_kind::terminal_failure,
                "unknown job kind '" + job.kind
                  + "': no handler is registered for it on this worker");
  nlohmann::json args;
  try {
    args = nlohmann::json::parse(job.args);
  } catch (const std::exception& e) {
    return fail(outcome_kind::terminal_failure,
                malformed_args_error(job.kind, e.what()).what());
  }
  job_context ctx{job.id,      job.kind,        job.queue,
                  job.attempt, job.error_count, job.metadata};
  try {
    i->second(args, ctx);
  } catch (const terminal_error& e) {
    return fail(outcome_kind::terminal_failure, e.what());
  } catch (const std::exception& e) {
    return fail(outcome_kind::retryable_failure, e.what());
  } catch (...) {
    return fail(outcome_kind::retryable_failure,
                "the handler of kind '" + job.kind
                  + "' threw a non-standard exception");
  }
  out.kind = outcome_kind::completed;
  return out;
}

} // namespace aw
