#pragma once
// The dashboard's reads and its audit log (app/dashboard.hpp serves them).
// Every list is a keyset page, newest first, that counts nothing: it stops
// at its limit, and a filter that matches little looks at a bounded number
// of rows per request (the scan budget) and says where it stopped, so a
// page answers in milliseconds on a table of millions. Counts come from the
// engine's queue sample, never from here.
//
// Rows come back as JSON text, ready to serve.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actor_worker/messages/observer.hpp"
#include "actor_worker/storage/admin_dead_letters.hpp"

namespace pqxx {
class connection_base;
class transaction_base;
}

namespace aw::storage {

/// One page of a dashboard list.
struct dashboard_page {
  /// A JSON array of rows, newest first.
  std::string rows = "[]";
  /// Where the next page starts (its rows are below this id); nothing: no
  /// older row matches.
  std::optional<int64_t> next_before;
  /// The page has fewer rows than asked for although older rows may
  /// match: the scan budget ran out at next_before (the page says
  /// "searched down to ...").
  bool partial = false;
};

/// Which jobs the dashboard lists: "" matches anything.
struct dashboard_job_filter {
  /// One of job_states(), or "".
  std::string state;
  /// Only jobs of this queue ("" matches any).
  std::string queue;
  /// Only jobs of this kind ("" matches any).
  std::string kind;
  /// Only ids below this one; 0: from the newest.
  int64_t before = 0;
  /// Rows per page (1 to 500).
  int64_t limit = 50;
  /// The most rows one request looks at below `before` where the filter
  /// cannot be answered from an index (queue and kind filters, available
  /// lane jobs; completed lane jobs, whose state is derived, a tenth as
  /// many).
  int64_t scan_budget = 20000;
};

/// One page of jobs, newest first, as the `jobs` view shows them (the
/// columns a list needs: no args or metadata, the error cut short). Each
/// state is read where it lives: the live states off the lanes from their
/// partial indexes and running lane jobs from the open claim batches (few
/// rows, read whole); finished jobs, available lane jobs and filters
/// without an index in id order within the budget. Read in one
/// repeatable-read snapshot.
dashboard_page dashboard_jobs(pqxx::connection_base& conn,
                              const dashboard_job_filter& filter);

/// Which dead letters the dashboard lists, and which page.
struct dashboard_dead_letter_filter {
  /// Queue, kind and error fingerprint ("" matches anything; the id is
  /// not used). With kind and fingerprint the page lists one failure
  /// group through its index.
  dead_letter_filter match;
  /// Only dead letters with ids below this one; 0: from the newest.
  int64_t before = 0;
  /// At most this many rows.
  int64_t limit = 50;
  /// The most rows one page may scan for matches, so a rare filter stays cheap.
  int64_t scan_budget = 20000;
};

/// One page of dead letters, newest first (no args or metadata).
dashboard_page dashboard_dead_letters(pqxx::connection_base& conn,
                                      const dashboard_dead_letter_filter& f);

/// Dead letters grouped by kind and error fingerprint, the `limit`
/// largest groups: [{"kind", "fingerprint", "count", "first_seen",
/// "last_seen", "example", "example_queue", "example_id"}].
std::string failure_groups_json(pqxx::connection_base& conn, int64_t limit);

/// One sample of every queue's depth, for the overview of a node that
/// does not lead the cluster (the leader's maintenance samples for its
/// own); a process not seen for `reclaim_window` serves no job of it.
queue_samples dashboard_queue_samples(pqxx::connection_base& conn,
                                      std::chrono::milliseconds reclaim_window);

/// How many dead letters match `filter` (before a bulk action).
int64_t count_dead_letters(pqxx::connection_base& conn,
                           const dead_letter_filter& filter);

/// What a purge deleted.
struct purge_report {
  /// How many dead letters were deleted.
  int64_t purged = 0;
  /// The purged dead letters' original job ids (the first 1,000).
  std::vector<int64_t> job_ids;
};

/// Deletes the dead letters matching `filter` in `tx` (the caller
/// commits).
purge_report purge_dead_letters(pqxx::transaction_base& tx,
                                const dead_letter_filter& filter);

/// One row of the audit log (migrations/011_dashboard.sql).
struct audit_entry {
  /// job.retry, job.cancel, dead_letter.retry, dead_letter.purge.
  std::string action;
  /// What it was asked to act on, a JSON object.
  std::string target_json = "{}";
  /// How many jobs it changed.
  int64_t affected = 0;
  /// The jobs it changed; the first 1,000 are kept.
  std::vector<int64_t> job_ids;
  /// "ok", or why it was refused or failed.
  std::string outcome;
  /// The client's address.
  std::string remote_addr;
  /// The client's User-Agent.
  std::string user_agent;
  /// The worker id of the node that served it.
  std::string worker;
};

/// Writes `entry` in `tx`, the action's own transaction; returns its id.
int64_t write_audit(pqxx::transaction_base& tx, const audit_entry& entry);

/// The newest audit rows below `before` (0: from the newest).
dashboard_page audit_log_page(pqxx::connection_base& conn, int64_t before,
                              int64_t limit);

} // namespace aw::storage
