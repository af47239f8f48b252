// loopback_address.hpp — 127.0.0.1:`port` as a socket address, for the tests' own small TCP
// servers and relays (tests only ever target loopback).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>

namespace sandglass::testing {

inline sockaddr_in loopback_address(std::uint16_t port = 0) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

}  // namespace sandglass::testing
