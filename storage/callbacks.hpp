#pragma once
// Resolving external callbacks: a job parked in `waiting_external` is
// completed, failed (dead-lettered) or retried by its callback id. Each
// resolution is one UPDATE (or move) in the caller's transaction, so the
// caller can insert follow-ups in the same transaction.

#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/job.hpp"

namespace pqxx {
class dbtransaction;
}

namespace aw::storage {

/// What to do with a waiting job.
enum class callback_action : uint8_t {
  /// state `completed`, the payload stored in callback_result.
  complete,
  /// Moved to the dead letter queue with the error as its last message.
  fail,
  /// Back to `available` at once (not charged), the payload stored.
  retry,
};

/// Parses "complete", "fail" or "retry"; throws std::invalid_argument.
callback_action parse_callback_action(const std::string& text);

/// A resolution that changed nothing; code() says why.
class callback_error : public std::runtime_error {
public:
  callback_error(ec code, const std::string& message)
    : std::runtime_error(message), code_(code) {
    // nop
  }

  ec code() const {
    return code_;
  }

private:
  ec code_;
};

/// Resolves `callback_id` in `tx`. Returns the event the transition fires
/// (completed with zero duration, exhausted or retried) with the committed
/// row. Throws callback_error for a malformed or unknown id or a job that is
/// not waiting any more; the transaction is then unchanged.
job_event resolve_callback(pqxx::dbtransaction& tx,
                           const std::string& callback_id,
                           callback_action action,
                           const nlohmann::json& payload,
                           const std::string& error_message);

} // namespace aw::storage
