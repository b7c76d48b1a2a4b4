#include "actor_worker/storage/notification_listener.hpp"

#include <pqxx/pqxx>

namespace aw::storage {

namespace {

class receiver : public pqxx::notification_receiver {
public:
  receiver(pqxx::connection_base& conn, const std::string& channel,
           std::vector<notification>& sink)
    : pqxx::notification_receiver(conn, channel), sink_(sink) {
    // nop
  }

  void operator()(const std::string& payload, int) override {
    sink_.push_back(notification{channel(), payload});
  }

private:
  std::vector<notification>& sink_;
};

} // namespace

struct notification_listener::impl {
  std::vector<notification> received;
  pqxx::connection conn;
  std::vector<std::unique_ptr<receiver>> receivers;
  impl(const std::string& url, const std::vector<std::string>& channels)
    : conn(url) {
    for (auto& channel : channels)
      receivers.push_back(std::make_unique<receiver>(conn, channel, received));
    // The receivers' constructors issue LISTEN lazily; force it now so a
    // NOTIFY sent right after connect() is not missed.
    conn.get_notifs();
  }
  ~impl() {
    // Receivers unregister from the connection: before it goes.
    receivers.clear();
  }
};

notification_listener::notification_listener(std::string url,
                                             std::vector<std::string> channels)
  : url_(std::move(url)), channels_(std::move(channels)) {
  // nop
}

notification_listener::~notification_listener() {
  disconnect();
}

void notification_listener::connect() {
  if (!impl_)
    impl_ = std::make_unique<impl>(url_, channels_);
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

std::vector<notification>
notification_listener::wait_for(std::chrono::milliseconds wait) {
  connect();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  impl_->conn.await_notification(us / 1'000'000, us % 1'000'000);
  // A broken connection shows up as a failed poll, not an exception from
  // await_notification: probe it so the caller can back off and reconnect.
  if (!impl_->conn.is_open())
    throw pqxx::broken_connection("the LISTEN connection was lost");
  impl_->conn.get_notifs();
  std::vector<notification> out;
  out.swap(impl_->received);
  return out;
}

} // namespace aw::storage
