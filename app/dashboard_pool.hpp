#pragma once
// The dashboard's connections to one database (app/dashboard.hpp keeps one
// pool per configured database): at most a few, opened on first use,
// shared by the HTTP endpoint's threads. A connection that broke is
// dropped; the next request opens a new one.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

// pqxx::connection is an alias in libpqxx 6.4: it cannot be declared
// forward.
#include <pqxx/connection>

namespace aw {

/// The dashboard's connections to one database: a few, opened on first use, shared by the HTTP threads.
class dashboard_pool {
public:
  /// How long a request waits for a connection when all are in use.
  static constexpr std::chrono::seconds wait{5};

  /// `url`: the database's (never logged); `session_settings`: name the
  /// session and bound its statements (false behind a transaction-mode
  /// pooler, where a session setting would leak to other clients); `max`:
  /// connections open at once.
  dashboard_pool(std::string url, bool session_settings, size_t max);
  ~dashboard_pool();

  dashboard_pool(const dashboard_pool&) = delete;
  dashboard_pool& operator=(const dashboard_pool&) = delete;

  /// A connection taken from the pool until the lease ends.
  class lease {
  public:
    /// Holds `conn`, taken from `pool` (which gets it back when the lease ends).
    lease(dashboard_pool* pool, std::unique_ptr<pqxx::connection> conn);
    /// Moves the connection to a new lease.
    lease(lease&&) noexcept;
    lease& operator=(lease&&) = delete;
    ~lease();
    /// The leased connection.
    pqxx::connection& operator*() {
      return *conn_;
    }
    /// Drops the connection instead of giving it back.
    void broken() {
      broken_ = true;
    }

  private:
    dashboard_pool* pool_;
    std::unique_ptr<pqxx::connection> conn_;
    bool broken_ = false;
  };

  /// Every connection stayed in use for `wait`.
  struct busy : std::runtime_error {
    busy();
  };

  /// An idle connection, or a new one while fewer than `max` are open.
  /// Throws busy, or what connecting throws (pqxx::broken_connection when
  /// the database cannot be reached).
  lease take();

private:
  void give_back(std::unique_ptr<pqxx::connection> conn, bool broken);

  std::string url_;
  bool session_settings_;
  size_t max_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  size_t open_ = 0;
};

} // namespace aw
