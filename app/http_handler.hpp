#pragma once
// Job kinds run by an HTTP endpoint: `[kinds.NAME] http = { url = "...",
// headers = {...}, timeout = "..." }`.
//
// Each run POSTs the job document (app/job_protocol.hpp) to the URL with
// Content-Type: application/json and the configured headers (and, for a
// kind with `callback_timeout`, its run's callback id in X-AW-Callback-Id),
// and maps the response to an outcome:
//
//   2xx                 completed, or the outcome object the body holds
//   429, 503            retry after Retry-After (seconds or an HTTP date);
//                       without it, a retryable failure (usual backoff)
//   other 4xx           terminal failure: dead-lettered
//   3xx                 terminal failure (redirects are not followed: a
//                       POST must not be replayed elsewhere)
//   5xx, timeout, connection error
//                       retryable failure
//
// Header values are secrets: they are never logged nor put in an error
// message, and an error response's body quoted in a message has any of
// them masked. The URL is quoted without user info or query.
//
// Threading: one thread per http_client runs libcurl's multi interface for
// every transfer of every HTTP kind (connections are reused across them);
// a run holds no thread. Cancellation (deadline, lost lease, shutdown)
// aborts the transfer. libcurl's resolver may use a short-lived thread of
// its own per name lookup.

#include <memory>
#include <string>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/config/config.hpp"

namespace aw {

/// Runs the requests of HTTP kinds on one thread.
class http_client {
public:
  http_client();

  /// Aborts the transfers still running (their runs fail: "the worker
  /// stopped") and joins the thread.
  ~http_client();

  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// A kind as its requests use it (its secrets listed once).
  struct kind;

  /// Prepares `cfg` for start().
  static std::shared_ptr<const kind> prepare(http_kind_config cfg);

  /// POSTs `body` for job `job_id` as `k` says; `done` receives the
  /// outcome. `cancel` aborts the transfer. `callback_id`, when not empty,
  /// is the run's registered callback id, sent as X-AW-Callback-Id.
  void start(std::shared_ptr<const kind> k, int64_t job_id, std::string body,
             job_promise done, const cancellation_token& cancel,
             std::string callback_id = {});

  /// Transfers running now.
  size_t running() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

/// An asynchronous handler that POSTs each job as `kind` says.
registry::raw_async_handler http_handler(std::shared_ptr<http_client> client,
                                         http_kind_config kind);

/// `url` without user info, query and fragment: what messages may quote.
std::string redacted_url(const std::string& url);

} // namespace aw
