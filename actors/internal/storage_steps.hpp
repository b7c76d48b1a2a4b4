#pragma once
// The steps of the storage actor (actors/storage.hpp) that its sources
// share:
//
//   actors/storage.cpp           the behaviour: one handler per message,
//                                each a named function of the actor, and
//                                the claims
//   actors/storage_outcomes.cpp  recording outcomes: the flush, splitting
//                                what the database refuses, reports to the
//                                pollers, events and follow-ups
//
// Internal to aw_actors: not installed.

#include <cstddef>
#include <vector>

#include "actor_worker/actors/storage.hpp"

namespace aw::storage_steps {

// -- statements (actors/storage.cpp) ------------------------------------------

/// The connection broke or was refused (for now, or until someone fixes
/// the URL or the password): the statement may or may not have committed,
/// and retrying later is the remedy. Outcomes are never given up for it.
bool unavailable(const caf::error& err);

/// Tells the observer (if any) how a statement of `operation` went.
void observe(const storage_state& st, const char* operation,
             const caf::error& err);

/// Copies of the pending outcomes, for the backend (the entries keep
/// theirs until the commit).
std::vector<job_outcome> pending_outcomes(const storage_state& st);

// -- outcomes (actors/storage_outcomes.cpp) ----------------------------------

/// Hands a committed transition to the hook dispatcher: only transitions of
/// observed kinds carry their row, and only those have anyone to hear them.
void publish(storage_pointer self, job_event&& e);

/// Follow-ups inserted after their transitions committed, best effort: a
/// rescue's always, a dead-lettering's when they failed in its transaction.
/// A failing follow-up must never leave a job stuck: its error (which names
/// the follow-up's kind, event and job) is logged and counted under
/// `stage`, and the transitions (`standing`) stand.
void follow_ups_after_commit(storage_pointer self,
                             const std::vector<job_event>& events,
                             const char* stage, const char* standing);

/// What became of the outcomes entries[0 .. count) (pending ones, or ones
/// a transactional handler committed): reports to their pollers (one
/// message per poller), events to the hooks.
void deliver(storage_pointer self, const pending_outcome* entries,
             size_t count, std::vector<storage::finish_report>& reports,
             storage::failure_follow_ups failures
             = storage::failure_follow_ups::in_transaction);

/// Commits the pending outcomes. Whatever the database refuses is split
/// off; what cannot be written now (connectivity) stays pending and is
/// retried with backoff, marked in doubt.
void flush(storage_pointer self);

} // namespace aw::storage_steps
