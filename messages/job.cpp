#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/observer.hpp"

namespace aw {

const char* to_string(outcome_kind k) {
  switch (k) {
    case outcome_kind::completed:
      return "completed";
    case outcome_kind::retryable_failure:
      return "retryable failure";
    case outcome_kind::terminal_failure:
      return "terminal failure";
    case outcome_kind::deadline_exceeded:
      return "deadline exceeded";
    case outcome_kind::retry_after:
      return "retry after";
    case outcome_kind::snoozed:
      return "snoozed";
    case outcome_kind::cancelled:
      return "cancelled";
    case outcome_kind::waiting_callback:
      return "waiting for callback";
    case outcome_kind::abandoned:
      return "abandoned after its deadline";
  }
  return "?";
}

const char* to_string(rescue_reason r) {
  switch (r) {
    case rescue_reason::stale_heartbeat:
      return "stale heartbeat";
    case rescue_reason::deadline_exceeded:
      return "deadline exceeded";
    case rescue_reason::expired_callback:
      return "expired callback";
  }
  return "?";
}

const char* to_string(execution_result r) {
  switch (r) {
    case execution_result::completed:
      return "completed";
    case execution_result::retried:
      return "retried";
    case execution_result::dead_lettered:
      return "dead_lettered";
    case execution_result::cancelled:
      return "cancelled";
    case execution_result::snoozed:
      return "snoozed";
    case execution_result::parked:
      return "parked";
    case execution_result::lost:
      return "lost";
  }
  return "?";
}

const char* to_string(event_type t) {
  switch (t) {
    case event_type::started:
      return "started";
    case event_type::waiting_for_callback:
      return "waiting_for_callback";
    case event_type::completed:
      return "completed";
    case event_type::retried:
      return "retried";
    case event_type::exhausted:
      return "exhausted";
    case event_type::cancelled:
      return "cancelled";
    case event_type::rescued:
      return "rescued";
  }
  return "?";
}

} // namespace aw
