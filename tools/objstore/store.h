// The object store on Messenger RPC (issue 16, item 6): an in-memory map from keys to
// values (up to 4 MiB), served as four RPC methods, and the codecs a client needs.
// Method bodies (all lengths little-endian u32):
//   PUT  key_len, key, value         -> ok, empty
//   GET  key                         -> ok, the value | handler error kNotFound
//   DEL  key                         -> ok, empty     | handler error kNotFound
//   LIST prefix                      -> ok, the matching keys, each followed by '\n'
// PUT is registered with dedupe: a retry with CallOptions::retry_of is not applied twice
// while the server's session with the client lasts; after a session reset or a server
// restart (the store and the table are in memory) it is applied again (at least once).
//
// Threading: the endpoint's loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rmsg/rpc.h"

namespace rmsg::objstore {

enum Method : std::uint32_t { kPut = 1, kGet = 2, kDel = 3, kList = 4 };
inline constexpr std::uint32_t kNotFound = 1;
inline constexpr std::uint32_t kBadRequest = 2;
inline constexpr std::size_t kMaxValue = std::size_t{4} << 20;

// RpcOptions for a store node: messages large enough for a 4 MiB value and its key.
RpcOptions store_options(NodeId node);

class Server {
 public:
  // Registers the methods on `ep`, which must outlive the server.
  explicit Server(RpcEndpoint& ep);
  std::size_t size() const noexcept { return kv_.size(); }

 private:
  std::map<std::string, std::vector<std::byte>, std::less<>> kv_;
};

std::vector<std::byte> put_body(std::string_view key, std::span<const std::byte> value);
std::vector<std::byte> key_body(std::string_view key);
std::string to_string(std::span<const std::byte> bytes);

}  // namespace rmsg::objstore
