#include "app/registry.hpp"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

namespace aw {

namespace {

/// Error messages come from arbitrary exceptions; the database only takes
/// valid UTF-8 without NUL. Invalid bytes become '?', and very long
/// messages are cut so one failure cannot bloat the row.
std::string sanitize_message(const std::string& in) {
  constexpr size_t max_bytes = 4096;
  std::string out;
  out.reserve(std::min(in.size(), max_bytes));
  size_t i = 0;
  while (i < in.size() && out.size() < max_bytes) {
    auto c = static_cast<unsigned char>(in[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3
                                                  : (c >> 3) == 0x1E ? 4 : 0;
    bool valid = len > 0 && i + len <= in.size() && c != 0;
    for (size_t k = 1; valid && k < len; ++k)
      valid = (static_cast<unsigned char>(in[i + k]) >> 6) == 0x2;
    if (valid) {
      out.append(in, i, len);
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  if (i < in.size())
    out += " [truncated]";
  return out;
}

} // namespace

registry& registry::add_raw_handler(const std::string& kind, raw_handler fn) {
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

job_outcome registry::run(const claimed_job& job,
                          const cancellation_token& cancel) const {
  job_outcome out;
  out.job_id = job.id;
  auto fail = [&](outcome_kind kind, std::string message) {
    out.kind = kind;
    out.message = sanitize_message(message);
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
  job_context ctx{job.id,          job.kind,     job.queue, job.attempt,
                  job.error_count, job.metadata, cancel};
  try {
    auto result = i->second(args, ctx);
    out.kind = result.kind();
    out.delay_ms = result.delay().count();
    out.message = sanitize_message(result.message());
    if (out.delay_ms < 0)
      return fail(outcome_kind::terminal_failure,
                  "the handler of kind '" + job.kind
                    + "' returned a negative delay");
    return out;
  } catch (const terminal_error& e) {
    return fail(outcome_kind::terminal_failure, e.what());
  } catch (const std::exception& e) {
    return fail(outcome_kind::retryable_failure, e.what());
  } catch (...) {
    return fail(outcome_kind::retryable_failure,
                "the handler of kind '" + job.kind
                  + "' threw a non-standard exception");
  }
}

registry& registry::on_event_kind(const std::string& kind, hook fn) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  hooks_[kind].push_back(std::move(fn));
  return *this;
}

void registry::run_hooks(const event& e) const {
  auto i = hooks_.find(e.kind);
  if (i == hooks_.end())
    return;
  size_t n = 0;
  for (auto& fn : i->second) {
    ++n;
    try {
      fn(e);
    } catch (const std::exception& ex) {
      spdlog::error("hook #{} of kind '{}' threw on {} of job {}: {}", n,
                    e.kind, to_string(e.type), e.job_id(), ex.what());
    } catch (...) {
      spdlog::error("hook #{} of kind '{}' threw a non-standard exception on "
                    "{} of job {}",
                    n, e.kind, to_string(e.type), e.job_id());
    }
  }
}

std::vector<enqueue_request> registry::follow_ups(const event& e) const {
  std::vector<enqueue_request> out;
  auto i = follow_ups_.find(e.kind);
  if (i == follow_ups_.end())
    return out;
  for (auto& spec : i->second)
    if (spec.type == e.type)
      if (auto req = spec.fn(e))
        out.push_back(std::move(*req));
  return out;
}

std::vector<std::string> registry::observed_kinds() const {
  std::set<std::string> kinds;
  for (auto& [kind, hs] : hooks_)
    kinds.insert(kind);
  for (auto& [kind, fs] : follow_ups_)
    kinds.insert(kind);
  return {kinds.begin(), kinds.end()};
}

bool registry::has_hooks(const std::string& kind) const {
  return hooks_.count(kind) > 0;
}

bool registry::has_follow_ups(const std::string& kind, event_type type) const {
  auto i = follow_ups_.find(kind);
  if (i == follow_ups_.end())
    return false;
  for (auto& spec : i->second)
    if (spec.type == type)
      return true;
  return false;
}

} // namespace aw
