#pragma once
// What command and HTTP handlers (app/command_handler.hpp,
// app/http_handler.hpp) exchange with the program they run a job by: the
// job document they send, and the outcome object a program may send back.
//
// The job document (one JSON object, on a command's stdin or as an HTTP
// request's body):
//
//   {"id": 42, "kind": "send_email", "queue": "default",
//    "args": {...},            the job's args
//    "metadata": {...},        the job's metadata ({} unless set; null if
//                              unreadable)
//    "attempt": 3,             the attempt as the retry limit counts it
//                              (error_count + 1: snoozes do not count)
//    "error_count": 2,         failed attempts before this run
//    "run": 4,                 times started, this run included (snoozes
//                              and releases count too)
//    "callback_id": "..."}     only for a kind with `callback_timeout`: the
//                              id this run registered before it started,
//                              to hand on before answering
//                              wait_for_callback
//
// An outcome object (the last stdout line of a command that exits 0, or
// the body of a 2xx response) ends the run some other way than
// `completed`:
//
//   {"outcome": "completed"}
//   {"outcome": "retry", "after": "30s", "message": "..."}
//       runs again after 30 s, counting an attempt; without "after" it is
//       a failure retried with the usual backoff
//   {"outcome": "fail", "message": "..."}      dead-lettered at once
//   {"outcome": "snooze", "for": "1m"}         runs again after a minute,
//                                              not counting an attempt
//   {"outcome": "cancel", "reason": "..."}     state cancelled
//   {"outcome": "wait_for_callback", "timeout": "1h"}
//       parks the job until its callback is resolved or the timeout
//       passes. The callback id is assigned when the job parks, or, for a
//       kind with `callback_timeout`, before the run started (then that
//       registration's timeout stands): see docs/callbacks.md
//
// Durations are strings as in the configuration ("250ms", "30s", "1h") or
// a number of seconds. Other keys are ignored. An object whose "outcome"
// is unknown or whose duration is malformed fails the job terminally,
// naming the problem: a program speaking the protocol wrong would do the
// same on every attempt.

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "actor_worker/messages/async.hpp"
#include "actor_worker/messages/handler.hpp"
#include "actor_worker/messages/outcome.hpp"

namespace aw {

/// The job document of the job `ctx` runs, with `args`.
std::string job_document(const nlohmann::json& args, const job_context& ctx);

/// `text` parsed when it is a JSON object with the key "outcome" (leading
/// and trailing whitespace allowed); nothing otherwise.
std::optional<nlohmann::json> outcome_object(std::string_view text);

/// The outcome an outcome object asks for. A failure ("retry" without
/// "after", "fail") is thrown: std::runtime_error (retryable) or
/// terminal_error. A malformed object throws terminal_error saying why.
outcome parse_outcome_object(const nlohmann::json& object);

/// Ends the run through `done` as `object` asks (see parse_outcome_object).
void finish_with_outcome_object(const job_promise& done,
                                const nlohmann::json& object);

} // namespace aw
