#include "actor_worker/messages/outcome.hpp"

#include <algorithm>

#include "actor_worker/messages/handler.hpp"

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

job_outcome failure_of(int64_t id, outcome_kind kind,
                       const std::string& message) {
  job_outcome out;
  out.job_id = id;
  out.kind = kind;
  out.message = sanitize_message(message);
  return out;
}

job_outcome outcome_of(int64_t id, const std::string& kind, const outcome& o) {
  if (o.delay().count() < 0)
    return failure_of(id, outcome_kind::terminal_failure,
                      "the handler of kind '" + kind
                        + "' returned a negative delay");
  job_outcome out;
  out.job_id = id;
  out.kind = o.kind();
  out.delay_ms = o.delay().count();
  out.message = sanitize_message(o.message());
  return out;
}

job_outcome outcome_of_exception(int64_t id, const std::string& kind,
                                 std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const terminal_error& ex) {
    return failure_of(id, outcome_kind::terminal_failure, ex.what());
  } catch (const std::exception& ex) {
    return failure_of(id, outcome_kind::retryable_failure, ex.what());
  } catch (...) {
    return failure_of(id, outcome_kind::retryable_failure,
                      "the handler of kind '" + kind
                        + "' threw a non-standard exception");
  }
}

} // namespace aw
