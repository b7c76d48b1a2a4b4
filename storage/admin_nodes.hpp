#pragma once
// The live worker processes (worker_nodes, migrations/010_nodes.sql),
// behind `actor-worker nodes`.

#include <chrono>
#include <string>

namespace pqxx {
class connection_base;
}

namespace aw::storage {

/// Every row of worker_nodes as a JSON array of objects keyed by column
/// name, plus `alive`: seen within `reclaim_window`.
std::string nodes_json(pqxx::connection_base& conn,
                       std::chrono::milliseconds reclaim_window);

/// True when no live worker process (not gone, seen within
/// `reclaim_window`) serves `queue` with a handler for `kind`: a job of
/// it would wait until one starts (storage/sql/nodes.sql:kind_unserved).
bool kind_unserved(pqxx::connection_base& conn, const std::string& kind,
                   const std::string& queue,
                   std::chrono::milliseconds reclaim_window);

} // namespace aw::storage
