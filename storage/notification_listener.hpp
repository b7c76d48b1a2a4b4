#pragma once
// The LISTEN side of LISTEN/NOTIFY on its own connection (a connection
// that listens must never hold a transaction open, or nothing arrives).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace aw::storage {

/// One NOTIFY received.
struct notification {
  /// The channel it came on.
  std::string channel;
  /// Its payload.
  std::string payload;
};

/// The LISTEN side of LISTEN/NOTIFY, on a connection of its own that never holds a transaction open.
class notification_listener {
public:
  /// Listens on `channels` once connect() succeeds.
  notification_listener(std::string url, std::vector<std::string> channels);
  ~notification_listener();

  /// Opens the connection and issues LISTEN. Throws when unreachable.
  void connect();

  /// Closes the connection (a later connect() opens a new one).
  void disconnect() noexcept;

  /// True while the connection is open.
  bool connected() const noexcept;

  /// Blocks up to `wait` for notifications; returns those received, in
  /// order, possibly none. Throws when the connection broke.
  std::vector<notification> wait_for(std::chrono::milliseconds wait);

private:
  struct impl;
  std::string url_;
  std::vector<std::string> channels_;
  std::unique_ptr<impl> impl_;
};

} // namespace aw::storage
