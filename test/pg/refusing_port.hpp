#pragma once
// A TCP port that refuses connections, for tests of an unreachable server
// (pg multi_host_test, dashboard_databases_test, worker_test).

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace aw::test {

/// A TCP port on 127.0.0.1 that refuses connections for this object's
/// lifetime: a socket bound to it that never listens (Linux answers a
/// connection attempt with a reset), held so no other process takes it.
class refusing_port {
public:
  refusing_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    BOOST_REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    BOOST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    BOOST_REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~refusing_port() {
    ::close(fd_);
  }
  refusing_port(const refusing_port&) = delete;
  refusing_port& operator=(const refusing_port&) = delete;
  int port() const {
    return port_;
  }

private:
  int fd_ = -1;
  int port_ = 0;
};

} // namespace aw::test
