#pragma once
// Reading one sample of every queue's depth (storage/sql/queue_samples.sql):
// shared by the leader's maintenance (job_store::sample_queues) and the
// dashboard of a node that does not lead (storage::dashboard_queue_samples).

#include "actor_worker/messages/observer.hpp"

namespace pqxx {
class result;
}

namespace aw::storage {

/// The rows of queue_samples.sql (queue, state, jobs, oldest, oldest_age)
/// folded into one sample per queue, sorted by queue. The statement's one
/// parameter is the reclaim window in seconds (a node not seen for it does
/// not serve: see queue_sample::unserved).
queue_samples to_queue_samples(const pqxx::result& rows);

} // namespace aw::storage
