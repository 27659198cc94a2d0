// The object store tools' argument checks: numbers and addresses are refused with a
// message naming the option (never an exception or an abort), so a typo never starts a
// server or a run with a value the user did not mean.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "rmsg/address.h"

namespace rmsg::objstore {

// A whole decimal number in [min, max]; prints why not (naming `option`) and gives none.
inline std::optional<std::uint64_t> parse_number(std::string_view option, std::string_view text,
                                                 std::uint64_t min = 0,
                                                 std::uint64_t max = UINT64_MAX) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < min || v > max) {
    std::fprintf(stderr, "objstore: %.*s: '%.*s' is not a number from %llu to %llu\n",
                 static_cast<int>(option.size()), option.data(), static_cast<int>(text.size()),
                 text.data(), static_cast<unsigned long long>(min),
                 static_cast<unsigned long long>(max));
    return std::nullopt;
  }
  return v;
}

// A numeric HOST:PORT (names are not resolved: rmsg/address.h); prints why not.
inline std::optional<SocketAddress> parse_address(std::string_view option, std::string_view text) {
  auto a = SocketAddress::parse(text);
  if (!a) {
    std::fprintf(stderr,
                 "objstore: %.*s: '%.*s' is not a numeric address a.b.c.d:PORT or [v6]:PORT "
                 "(host names are not resolved)\n",
                 static_cast<int>(option.size()), option.data(), static_cast<int>(text.size()),
                 text.data());
    return std::nullopt;
  }
  return a.value();
}

inline bool parse_transport(std::string_view text) {
  if (text == "tcp" || text == "rdma") return true;
  std::fprintf(stderr, "objstore: --transport: '%.*s' is neither tcp nor rdma\n",
               static_cast<int>(text.size()), text.data());
  return false;
}

}  // namespace rmsg::objstore
