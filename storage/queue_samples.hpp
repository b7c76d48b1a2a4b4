#pragma once
// Reading one sample of every queue's depth (storage/sql/samples.sql:queue_samples):
// shared by the leader's maintenance (job_store::sample_queues) and the
// dashboard of a node that does not lead (storage::dashboard_queue_samples).

#include "actor_worker/messages/observer.hpp"

namespace pqxx {
class result;
class transaction_base;
} // namespace pqxx

namespace aw::storage {

/// The rows of samples.sql:queue_samples (queue, state, jobs, oldest, oldest_age)
/// folded into one sample per queue, sorted by queue. The statement's one
/// parameter is the reclaim window in seconds (a node not seen for it does
/// not serve: see queue_sample::unserved).
queue_samples to_queue_samples(const pqxx::result& rows);

/// What samples.sql:queue_samples needs of the transaction it runs in, set first
/// (SET LOCAL: it holds behind a transaction-mode pooler too). No
/// sequential scan: every part has an index bounded by the live work,
/// while a scan of a ring slot reads its whole history (a plan the
/// planner may pick on a guessed selectivity, or on a slot that was empty
/// when it was made). No JIT: on a slot of a million jobs, compiling the
/// plan took 3.4 s of a statement that runs in 6 ms.
void queue_samples_settings(pqxx::transaction_base& tx);

} // namespace aw::storage
