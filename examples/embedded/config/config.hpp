#pragma once
// The shop's own configuration header. Its name is the library's
// (actor_worker/config/config.hpp) on purpose: an application's headers
// must not collide with the library's.

#include <chrono>
#include <cstdlib>
#include <string>

namespace shop {

struct settings {
  /// Who signs up in this demo.
  std::string customer_email = "ada@example.com";
  /// How long to wait for the welcome email and its audit entry.
  std::chrono::seconds wait{30};
};

/// SHOP_CUSTOMER_EMAIL and SHOP_WAIT_SECONDS override the defaults.
inline settings load_settings() {
  settings s;
  if (auto e = std::getenv("SHOP_CUSTOMER_EMAIL"); e && *e)
    s.customer_email = e;
  if (auto w = std::getenv("SHOP_WAIT_SECONDS"); w && *w)
    s.wait = std::chrono::seconds{std::atoi(w)};
  return s;
}

} // namespace shop
