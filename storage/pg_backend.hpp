#pragma once
// The PostgreSQL storage backend: a job_store (one connection) behind the
// backend interface. Exceptions become errors here, once; a broken
// connection is dropped so the next call reconnects.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actor_worker/storage/backend.hpp"
#include "actor_worker/storage/job_store.hpp"

namespace aw::storage {

/// A backend over one connection for `opts`. Connects lazily: a database
/// that is down only fails the first calls. `observed_kinds` (kinds with
/// hooks or follow-ups) get their rows back with their transitions;
/// `follow_ups` runs inside each outcome's transaction. Claims take only
/// jobs of `served_kinds` (nullopt: every kind).
std::unique_ptr<backend>
make_pg_backend(job_store_options opts, std::vector<std::string> observed_kinds,
                follow_up_function follow_ups,
                std::optional<std::vector<std::string>> served_kinds);

} // namespace aw::storage
