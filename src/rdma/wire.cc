#include "rdma/wire.h"

#include <arpa/inet.h>

#include <cstring>

namespace rmsg::rdma::wire {
namespace {

void put32(std::byte* p, std::uint32_t v) {
  const std::uint32_t be = htonl(v);
  std::memcpy(p, &be, 4);
}

std::uint32_t get32(const std::byte* p) {
  std::uint32_t be;
  std::memcpy(&be, p, 4);
  return ntohl(be);
}

void put64(std::byte* p, std::uint64_t v) {
  put32(p, static_cast<std::uint32_t>(v >> 32));
  put32(p + 4, static_cast<std::uint32_t>(v));
}

std::uint64_t get64(const std::byte* p) {
  return (std::uint64_t{get32(p)} << 32) | get32(p + 4);
}

}  // namespace

HelloBytes encode_hello(const Hello& h) {
  HelloBytes out;
  std::byte* b = out.bytes_.data();
  std::size_t len = kHelloSize;
  if (h.features != 0) {
    b[len] = static_cast<std::byte>(ExtType::features);
    b[len + 1] = std::byte{4};
    put32(&b[len + 2], h.features);
    len += kFeaturesFieldSize;
  }
  if (h.affinity != 0 && h.kind == HelloKind::request) {
    b[len] = static_cast<std::byte>(ExtType::affinity);
    b[len + 1] = std::byte{8};
    put64(&b[len + 2], h.affinity);
    len += kAffinityFieldSize;
  }
  if (h.recv_window != 0 && (h.features & kFeatureSharedReceive) != 0) {
    b[len] = static_cast<std::byte>(ExtType::recv_window);
    b[len + 1] = std::byte{4};
    put32(&b[len + 2], h.recv_window);
    len += kRecvWindowFieldSize;
  }
  static_assert(kHelloSize + kFeaturesFieldSize + kAffinityFieldSize + kRecvWindowFieldSize <=
                kMaxHelloSize);
  put32(&b[0], kMagic);
  b[4] = std::byte{h.version};
  b[5] = static_cast<std::byte>(len);
  b[6] = static_cast<std::byte>(h.kind);
  b[7] = static_cast<std::byte>(h.reason);
  put32(&b[8], h.recv_block_size);
  put32(&b[12], h.recv_block_count);
  put32(&b[16], h.send_block_size);
  put32(&b[20], h.send_block_count);
  put32(&b[24], h.inline_size);
  put32(&b[28], h.epoch);
  out.size_ = len;
  return out;
}

namespace {

// The extension block (the bytes from 32 up to the hello's length) into `h`.
Result<void> decode_extensions(std::span<const std::byte> block, Hello& h) {
  bool have_features = false;
  bool have_affinity = false;
  bool have_window = false;
  while (!block.empty()) {
    if (block.size() < 2) return Errc::protocol_error;  // a type without its length
    const auto type = static_cast<std::uint8_t>(block[0]);
    const auto len = static_cast<std::size_t>(block[1]);
    if (len > block.size() - 2) return Errc::protocol_error;  // runs past the hello
    const auto value = block.subspan(2, len);
    if (type == static_cast<std::uint8_t>(ExtType::features)) {
      if (len != 4 || have_features) return Errc::protocol_error;
      have_features = true;
      h.features = get32(value.data());
    } else if (type == static_cast<std::uint8_t>(ExtType::affinity)) {
      if (len != 8 || have_affinity) return Errc::protocol_error;
      have_affinity = true;
      h.affinity = get64(value.data());
    } else if (type == static_cast<std::uint8_t>(ExtType::recv_window)) {
      if (len != 4 || have_window) return Errc::protocol_error;
      have_window = true;
      h.recv_window = get32(value.data());
    }  // any other type: skipped
    block = block.subspan(2 + len);
  }
  return {};
}

}  // namespace

Result<Hello> decode_hello(std::span<const std::byte> data) {
  if (data.size() < 8 || get32(data.data()) != kMagic) return Errc::protocol_error;
  Hello h;
  h.version = static_cast<std::uint8_t>(data[4]);
  if (h.version != kVersion) return Errc::version_mismatch;
  const auto len = static_cast<std::size_t>(data[5]);
  if (len < kHelloSize || len > data.size()) return Errc::protocol_error;
  const auto kind = static_cast<std::uint8_t>(data[6]);
  if (kind < 1 || kind > 3) return Errc::protocol_error;
  h.kind = static_cast<HelloKind>(kind);
  h.reason = static_cast<RejectReason>(data[7]);
  h.recv_block_size = get32(&data[8]);
  h.recv_block_count = get32(&data[12]);
  h.send_block_size = get32(&data[16]);
  h.send_block_count = get32(&data[20]);
  h.inline_size = get32(&data[24]);
  h.epoch = get32(&data[28]);
  if (h.kind != HelloKind::reject &&
      (h.recv_block_size == 0 || h.recv_block_count < kMinRecvBlocks)) {
    return Errc::protocol_error;
  }
  RMSG_TRY(decode_extensions(data.subspan(kHelloSize, len - kHelloSize), h));
  // recv_window belongs to the shared-receive mode: never without its bit, never below
  // the guaranteed window.
  if (h.recv_window != 0 &&
      ((h.features & kFeatureSharedReceive) == 0 || h.recv_window < h.recv_block_count)) {
    return Errc::protocol_error;
  }
  return h;
}

}  // namespace rmsg::rdma::wire
