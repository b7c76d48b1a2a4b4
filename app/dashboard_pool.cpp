#include "actor_worker/app/dashboard_pool.hpp"

#include <pqxx/pqxx>

namespace aw {

dashboard_pool::dashboard_pool(std::string url, bool session_settings,
                               size_t max)
  : url_(std::move(url)), session_settings_(session_settings), max_(max) {
}

dashboard_pool::~dashboard_pool() = default;

dashboard_pool::lease::lease(dashboard_pool* pool,
                             std::unique_ptr<pqxx::connection> conn)
  : pool_(pool), conn_(std::move(conn)) {
}

dashboard_pool::lease::lease(lease&& other) noexcept
  : pool_(other.pool_), conn_(std::move(other.conn_)),
    broken_(other.broken_) {
  other.pool_ = nullptr;
}

dashboard_pool::lease::~lease() {
  if (pool_ != nullptr)
    pool_->give_back(std::move(conn_), broken_);
}

dashboard_pool::busy::busy()
  : std::runtime_error("the dashboard's database connections are all busy; "
                       "try again") {
}

dashboard_pool::lease dashboard_pool::take() {
  std::unique_lock<std::mutex> lock{mtx_};
  if (!cv_.wait_for(lock, wait,
                    [&] { return !idle_.empty() || open_ < max_; }))
    throw busy{};
  if (!idle_.empty()) {
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    return lease{this, std::move(conn)};
  }
  ++open_;
  lock.unlock();
  try {
    auto conn = std::make_unique<pqxx::connection>(url_);
    // A session of our own: named in pg_stat_activity, and no read runs
    // away.
    if (session_settings_) {
      pqxx::nontransaction tx{*conn};
      tx.exec("SET application_name = 'actor-worker dashboard'");
      tx.exec("SET statement_timeout = '15s'");
    }
    return lease{this, std::move(conn)};
  } catch (...) {
    std::lock_guard<std::mutex> guard{mtx_};
    --open_;
    cv_.notify_one();
    throw;
  }
}

void dashboard_pool::give_back(std::unique_ptr<pqxx::connection> conn,
                               bool broken) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (broken || !conn || !conn->is_open())
    --open_;
  else
    idle_.push_back(std::move(conn));
  cv_.notify_one();
}

} // namespace aw
