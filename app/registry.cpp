#include "app/registry.hpp"

#include <algorithm>

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
