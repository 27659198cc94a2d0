// libFuzzer target: the RDMA hello decoder (src/rdma/wire.cc), the first bytes an
// unauthenticated peer sends. Properties checked on every input:
//   - decode_hello never crashes, reads out of bounds (ASan) or hits UB (UBSan);
//   - it fails only with protocol_error or version_mismatch;
//   - what it accepts re-encodes to a hello that decodes to the same fields, and that
//     encoding is stable (encode(decode(encode(h))) == encode(h)).
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdma/wire.h"

namespace {

using rmsg::rdma::wire::Hello;

bool same(const Hello& a, const Hello& b) {
  return a.kind == b.kind && a.version == b.version && a.reason == b.reason &&
         a.recv_block_size == b.recv_block_size && a.recv_block_count == b.recv_block_count &&
         a.send_block_size == b.send_block_size && a.send_block_count == b.send_block_count &&
         a.inline_size == b.inline_size && a.epoch == b.epoch && a.features == b.features;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace wire = rmsg::rdma::wire;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  auto hello = wire::decode_hello(in);
  if (!hello) {
    const bool expected =
        hello.is(rmsg::Errc::protocol_error) || hello.is(rmsg::Errc::version_mismatch);
    if (!expected) __builtin_trap();
    return 0;
  }
  const auto bytes = wire::encode_hello(hello.value());
  auto again = wire::decode_hello(bytes);
  if (!again || !same(hello.value(), again.value())) __builtin_trap();
  const auto stable = wire::encode_hello(again.value());
  if (stable.size() != bytes.size()) __builtin_trap();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (stable[i] != bytes[i]) __builtin_trap();
  }
  return 0;
}
