#pragma once
// What the parts of the TOML loader (config/load*.cpp) share: the typed
// readers of a table's keys, which name the file, line and key in every
// complaint, and the readers of the sections one part reads for another.
// Internal to aw_config: not installed (it needs toml++, which the public
// headers do not).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "actor_worker/config/config.hpp"

namespace aw::config_detail {

// -- where a complaint points (config/load_fields.cpp) ------------------------

/// "FILE:LINE: key 'KEY'": the start of every complaint about a key.
std::string where(const std::string& source, const toml::node& node,
                  const std::string& key);

/// The same for a table.
std::string where(const std::string& source, const toml::table& table,
                  const std::string& key);

/// The value of `key` in `t` when the file sets it, else the table: where
/// an error about that key points.
const toml::node& at(const toml::table& t, const char* key);

/// Every key the file sets, by its full name ("worker.poll_interval"), for
/// errors found after reading (cross-key checks) to point at their line.
void index_keys(const toml::table& t, const std::string& prefix,
                std::map<std::string, const toml::node*>& out);

/// The node of `key` ("worker.poll_interval") in `root`, or null.
const toml::node* find_key(const toml::table& root, const std::string& key);

/// Runs cfg.validate(); its message starts with the key it is about, which
/// `locate` turns into the node in the file that sets it (or null).
void validate_at(runtime_config& cfg, const std::string& source,
                 const std::function<std::pair<std::string, const toml::node*>(
                   const std::string&)>& locate);

// -- typed readers (config/load_fields.cpp) -----------------------------------
// Each reads `key` of `t` into `out` when the file sets it and leaves `out`
// alone when not; `prefix` is the table's keys' prefix in messages
// ("worker.", "nodes.NAME."). A value of the wrong type or range throws
// config_error naming the file, line and key.

/// Rejects keys of `table` that are not in `known`.
void reject_unknown(const std::string& source, const toml::table& table,
                    const std::string& prefix,
                    const std::set<std::string>& known);

/// Reads a string value.
void read_string(const std::string& source, const toml::table& t,
                 const std::string& prefix, const char* key, std::string& out);

/// Reads a boolean value.
void read_bool(const std::string& source, const toml::table& t,
               const std::string& prefix, const char* key, bool& out);

/// Reads an array of strings.
void read_string_array(const std::string& source, const toml::table& t,
                       const std::string& prefix, const char* key,
                       std::vector<std::string>& out);

/// Reads an integer value within [min, max].
void read_int(const std::string& source, const toml::table& t,
              const std::string& prefix, const char* key, int& out, int64_t min,
              int64_t max);

/// Reads a duration string such as "250ms" or "2s".
void read_duration(const std::string& source, const toml::table& t,
                   const std::string& prefix, const char* key,
                   std::chrono::milliseconds& out);

/// Reads a byte size: an integer, or a string such as "64MiB", at least
/// `min`.
void read_size(const std::string& source, const toml::table& t,
               const std::string& prefix, const char* key, int64_t& out,
               int64_t min);

/// The table `key` of `t`, or null when the file has none; anything but a
/// table there is an error.
const toml::table* sub_table(const std::string& source, const toml::table& t,
                             const char* key, const std::string& prefix);

/// A kind, queue or schedule name as enqueue accepts it (name_problem):
/// 1 to max_name_length bytes, no control characters. `what` names it in
/// the message ("queue").
void check_name(const std::string& source, const toml::node& node,
                const std::string& key, const std::string& name,
                const char* what);

// -- sections (config/load_sections.cpp, load_kinds.cpp, load_periodic.cpp) ---

/// The keys of [worker].
const std::set<std::string>& worker_keys();

/// Reads the [worker] keys `w` sets into `out_cfg`; `p` is their prefix in
/// messages ("worker.", or "nodes.NAME." for a node's overrides). The
/// caller rejects unknown keys (a node's section has more).
void read_worker(const std::string& source, const toml::table& w,
                 const std::string& p, worker_config& out_cfg);

/// Reads a [queues.NAME] table (or a node's [nodes.N.queues.NAME]) into
/// `qc`; `p` is the keys' prefix in messages. `cluster_wide`: the top
/// level's [queues.NAME], which may also set the limits that hold for the
/// whole cluster (a node's section may not: every node must enforce the
/// same ones).
void read_queue(const std::string& source, const toml::table& q,
                const std::string& p, queue_config& qc, bool cluster_wide);

/// [kinds.NAME] tables.
void read_kinds(const std::string& source, const toml::table& kinds,
                runtime_config& cfg);

/// [periodic.NAME] tables, sorted by name.
void read_periodic(const std::string& source, const toml::table& schedules,
                   runtime_config& cfg);

/// The top level of a file: every section but [cluster] and [nodes],
/// validated.
runtime_config read_top_level(const toml::table& root,
                              const std::string& source);

// -- checks across keys (config/runtime_config.cpp, http_config.cpp) ----------
// Their messages start with the key they are about, so the loader points at
// its line.

/// The [http] keys of the dashboard.
void validate_http_dashboard(const http_config& http);

/// [databases.NAME] and [queues.Q] database: names, sizes, and no two
/// databases on one URL (their leaders and queue maps would clash).
void validate_databases(const runtime_config& cfg);

} // namespace aw::config_detail
