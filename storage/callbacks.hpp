#pragma once
// Resolving external callbacks: a job parked in `waiting_external` is
// completed, failed (dead-lettered), retried or resumed by its callback id. Each
// resolution is one UPDATE (or move) in the caller's transaction, so the
// caller can insert follow-ups in the same transaction.
//
// A running job may register its callback id before it parks
// (register_running_callback): a resolution of that id while the run goes
// on is kept, and applied as the run parks the job (job_store::finish_in,
// through apply_callback).

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/job.hpp"

namespace pqxx {
class dbtransaction;
class transaction_base;
}

namespace aw::storage {

/// What to do with a waiting job.
enum class callback_action : uint8_t {
  /// state `completed`, the payload stored in callback_result.
  complete,
  /// Moved to the dead letter queue with the error as its last message.
  fail,
  /// Back to `available` at once (not charged), the payload stored; fires
  /// `retried` (and its follow-ups).
  retry,
  /// Back to `available` at once (not charged), the payload stored, firing
  /// no event of its own: the job re-enters execution and its next run
  /// fires `started` and its outcome as usual. For a handler that waited
  /// for the payload to go on (it reads `callback_result`), not one that
  /// failed.
  resume,
};

/// Whether `text` has the form of a callback id (a UUID such as
/// 0b5e5c3e-6f1a-4c1e-9d7e-2a3b4c5d6e7f).
bool is_callback_id(const std::string& text);

/// Parses "complete", "fail", "retry" or "resume"; throws
/// std::invalid_argument naming the text and the accepted actions.
callback_action parse_callback_action(const std::string& text);

/// "complete", "fail", "retry" or "resume".
const char* to_string(callback_action action);

/// What a resolution committed.
struct callback_resolution {
  /// The action applied (or kept): complete, fail, retry or resume.
  callback_action action = callback_action::complete;
  /// The job still runs (it registered the id while running): the
  /// resolution is kept, and applied when that run parks the job; any
  /// other outcome of the run drops it. Nothing fires now.
  bool kept = false;
  /// The committed row as JSON: the job's (complete, retry, resume, or a
  /// kept one) or, for fail, its dead letter's.
  std::string row_json;
  /// Whether it fires `event` (every action applied but resume).
  bool has_event = false;
  /// The event it fires (completed with zero duration, exhausted or
  /// retried), carrying row_json.
  job_event event;
};

/// A resolution that changed nothing; code() says why.
class callback_error : public std::runtime_error {
public:
  /// An error of `code` (callback_not_found, callback_not_waiting, follow_up_failed) with `message`.
  callback_error(ec code, const std::string& message)
    : std::runtime_error(message), code_(code) {
    // nop
  }

  /// Why nothing changed.
  ec code() const {
    return code_;
  }

private:
  ec code_;
};

/// Resolves `callback_id` in `tx`: returns what it applied, the committed
/// row and the event it fires, or that it was kept for a job that still
/// runs (callback_resolution::kept). Throws callback_error for a malformed
/// or unknown id, a job that is not waiting any more, or a running job
/// that has a resolution kept already; the transaction is then unchanged.
callback_resolution resolve_callback(pqxx::dbtransaction& tx,
                           const std::string& callback_id,
                           callback_action action,
                           const nlohmann::json& payload,
                           const std::string& error_message);

/// Applies `action` to the job that waits on `callback_id`, which the
/// caller knows waits and has locked (a park applying a resolution kept
/// while its job ran). Returns what resolve_callback would.
callback_resolution apply_callback(pqxx::transaction_base& tx,
                                   const std::string& callback_id,
                                   callback_action action,
                                   const nlohmann::json& payload,
                                   const std::string& error_message);

/// A resolution kept while its job ran, as outcomes.sql:wait hands it back
/// (`early`): {"action", "payload", "error"}.
struct kept_resolution {
  /// The action asked for.
  callback_action action = callback_action::complete;
  /// The payload sent with it (null: none).
  nlohmann::json payload;
  /// A fail's message ("" for the default).
  std::string error;
};

/// Parses a kept resolution's JSON text; throws std::invalid_argument
/// saying what is wrong.
kept_resolution parse_kept_resolution(const std::string& text);

/// Registers a callback id for job `job_id` of run `lease` of `worker`,
/// timing out `timeout` from now, in `tx`: the id, or nothing when the run
/// no longer holds the job (callbacks.sql:callback_register).
std::optional<std::string>
register_running_callback(pqxx::transaction_base& tx, const std::string& worker,
                          int64_t job_id, int64_t lease,
                          std::chrono::milliseconds timeout);

} // namespace aw::storage
