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

}  // namespace

std::array<std::byte, kHelloSize> encode_hello(const Hello& h) {
  std::array<std::byte, kHelloSize> out{};
  put32(&out[0], kMagic);
  out[4] = std::byte{h.version};
  out[5] = std::byte{kHelloSize};
  out[6] = static_cast<std::byte>(h.kind);
  out[7] = static_cast<std::byte>(h.reason);
  put32(&out[8], h.recv_block_size);
  put32(&out[12], h.recv_block_count);
  put32(&out[16], h.send_block_size);
  put32(&out[20], h.send_block_count);
  put32(&out[24], h.inline_size);
  put32(&out[28], h.epoch);
  return out;
}

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
  return h;
}

Result<Imm> decode_imm(std::uint32_t imm) {
  if ((imm >> 24) != 0) return Errc::protocol_error;
  const auto type = (imm >> 16) & 0xFF;
  if (type > static_cast<std::uint32_t>(MsgType::keepalive)) return Errc::protocol_error;
  return Imm{static_cast<MsgType>(type), static_cast<std::uint16_t>(imm & 0xFFFF)};
}

}  // namespace rmsg::rdma::wire
