#include "store.h"

#include <cstring>

namespace rmsg::objstore {

RpcOptions store_options(NodeId node) {
  RpcOptions o;
  o.messenger.node_id = node;
  o.messenger.max_message_size = kMaxValue + (64 << 10);
  o.max_request_size = kMaxValue + (64 << 10);
  return o;
}

std::vector<std::byte> put_body(std::string_view key, std::span<const std::byte> value) {
  std::vector<std::byte> out(4 + key.size() + value.size());
  const auto n = static_cast<std::uint32_t>(key.size());
  for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = std::byte(n >> (8 * i) & 0xff);
  std::memcpy(out.data() + 4, key.data(), key.size());
  if (!value.empty()) std::memcpy(out.data() + 4 + key.size(), value.data(), value.size());
  return out;
}

std::vector<std::byte> key_body(std::string_view key) {
  std::vector<std::byte> out(key.size());
  if (!key.empty()) std::memcpy(out.data(), key.data(), key.size());
  return out;
}

std::string to_string(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Server::Server(RpcEndpoint& ep) {
  ep.handle(kPut,
            [this](const RpcRequest& r, RpcResponder reply) {
              if (r.body.size() < 4) return reply.error(kBadRequest);
              std::uint32_t n = 0;
              for (int i = 0; i < 4; ++i) n |= std::to_integer<std::uint32_t>(r.body[i]) << (8 * i);
              if (n > r.body.size() - 4 || r.body.size() - 4 - n > kMaxValue) {
                return reply.error(kBadRequest);
              }
              std::string key = to_string(r.body.subspan(4, n));
              auto v = r.body.subspan(4 + n);
              kv_[std::move(key)].assign(v.begin(), v.end());
              reply.ok();
            },
            {.dedupe = true});
  ep.handle(kGet, [this](const RpcRequest& r, RpcResponder reply) {
    auto it = kv_.find(to_string(r.body));
    if (it == kv_.end()) return reply.error(kNotFound);
    reply.ok(it->second);
  });
  ep.handle(kDel, [this](const RpcRequest& r, RpcResponder reply) {
    if (kv_.erase(to_string(r.body)) == 0) return reply.error(kNotFound);
    reply.ok();
  });
  ep.handle(kList, [this](const RpcRequest& r, RpcResponder reply) {
    const std::string prefix = to_string(r.body);
    std::string out;
    for (auto it = kv_.lower_bound(prefix); it != kv_.end() && it->first.starts_with(prefix);
         ++it) {
      out += it->first;
      out += '\n';
    }
    reply.ok(key_body(out));
  });
}

}  // namespace rmsg::objstore
