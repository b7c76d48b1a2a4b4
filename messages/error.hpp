#pragma once
// The runtime's error codes. Each value says what went wrong; the error's
// context message says where (which table, column, file, line, kind...).

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/atom.hpp>

namespace aw {

/// Error codes of the actor-worker runtime, category atom "aw".
enum class ec : uint8_t {
  /// The database could not be reached or the connection broke. Transient:
  /// loops log it at ERROR and retry with backoff. (Codes start at 1: CAF
  /// reads a code of 0 as "no error".)
  database_unavailable = 1,
  /// A statement failed for a reason other than connectivity.
  database_error,
  /// The database lacks a table or column the runtime uses: run
  /// `actor-worker migrate`. Fatal for `run`.
  schema_outdated,
  /// A runtime component failed in a way it cannot recover from (a bug).
  internal,
  /// No job has this callback id (or it is not a valid id). Nothing changed.
  callback_not_found,
  /// The callback's job is no longer waiting for it (already resolved,
  /// timed out, or cancelled). Nothing changed.
  callback_not_waiting,
  /// A follow-up enqueue failed (its callable threw or its INSERT failed);
  /// the transition it belonged to was rolled back.
  follow_up_failed,
  /// The server answered but refused the connection for a reason a retry
  /// cannot fix: a malformed database URL, a wrong password, an unknown
  /// role or database. A configuration error: the CLI exits 2 and `run`
  /// stops instead of retrying.
  database_misconfigured,
  /// A transactional handler's run (app/registry.hpp, add_transactional)
  /// was no longer this worker's when its transaction checked the lease or
  /// recorded the outcome (released, rescued, claimed again): the
  /// transaction rolled back, the handler's writes with it, and nothing
  /// was recorded. The run that holds the job now records its outcome.
  /// Also: a callback registration (job_context::register_callback) by a
  /// run that no longer holds its job was refused.
  stale_run,
};

/// The category atom under which CAF carries our codes.
constexpr caf::atom_value error_category_atom = caf::atom("aw");

/// A short, stable name for each code (used in logs and messages).
const char* to_string(ec code);

/// Builds a CAF error carrying `code` and a message that says what and where.
caf::error make_error(ec code, std::string message);

/// Renders an error of any category for a log line or a CLI message.
std::string render(const caf::error& err);

} // namespace aw
