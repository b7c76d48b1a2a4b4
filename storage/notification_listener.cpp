#include "actor_worker/storage/notification_listener.hpp"

#include <pqxx/pqxx>

namespace aw::storage {

namespace {

class receiver : public pqxx::notification_receiver {
public:
  receiver(pqxx::connection_base& conn, const std::string& channel,
           std::vector<std::string>& sink)
    : pqxx::notification_receiver(conn, channel), sink_(sink) {
    // nop
  }

  void operator()(const std::string& payload, int) override {
    sink_.push_back(payload);
  }

private:
  std::vector<std::string>& sink_;
};

} // namespace

struct notification_listener::impl {
  std::vector<std::string> received;
  pqxx::connection conn;
  receiver recv;
  impl(const std::string& url, const std::string& channel)
    : conn(url), recv(conn, channel, received) {
    // The receiver's constructor issues LISTEN lazily; force it now so a
    // NOTIFY sent right after connect() is not missed.
    conn.get_notifs();
  }
};

notification_listener::notification_listener(std::string url,
                                             std::string channel)
  : url_(std::move(url)), channel_(std::move(channel)) {
  // nop
}

notification_listener::~notification_listener() {
  disconnect();
}

void notification_listener::connect() {
  if (!impl_)
    impl_ = std::make_unique<impl>(url_, channel_);
}

void notification_listener::disconnect() noexcept {
  try {
    impl_.reset();
  } catch (...) {
    impl_.release();
  }
}

bool notification_listener::connected() const noexcept {
  return impl_ != nullptr;
}

std::vector<std::string>
notification_listener::wait_for(std::chrono::milliseconds wait) {
  connect();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  impl_->conn.await_notification(us / 1'000'000, us % 1'000'000);
  // A broken connection shows up as a failed poll, not an exception from
  // await_notification: probe it so the caller can back off and reconnect.
  if (!impl_->conn.is_open())
    throw pqxx::broken_connection("the LISTEN connection was lost");
  impl_->conn.get_notifs();
  std::vector<std::string> out;
  out.swap(impl_->received);
  return out;
}

} // namespace aw::storage
