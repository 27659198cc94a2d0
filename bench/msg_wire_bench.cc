// msg_wire_bench: throughput of the messenger's wire layer on this machine, one thread:
// CRC32C (the crc32 instruction vs the portable slicing-by-8) per buffer size, and frame
// encode + decode of one-segment message frames through feed() in 64 KiB reads. Best of
// `--repeat` rounds (default 5), each round ~0.1 s; numbers go to docs/perf.md, never
// into a test. Built with the tests (tests/wire/CMakeLists.txt): build/bin/msg_wire_bench.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wire/crc32c.h"
#include "wire/frame_decoder.h"
#include "wire/frame_encoder.h"

namespace {

using namespace rmsg::wire;
using Clock = std::chrono::steady_clock;

// Runs `once` (which processes `bytes`) until ~0.1 s passed; returns MB/s.
template <class F>
double rate(std::size_t bytes, F&& once) {
  const auto start = Clock::now();
  std::size_t n = 0;
  std::chrono::duration<double> el{};
  do {
    for (int i = 0; i < 16; ++i) once();
    n += 16;
    el = Clock::now() - start;
  } while (el.count() < 0.1);
  return static_cast<double>(bytes) * static_cast<double>(n) / el.count() / 1e6;
}

template <class F>
double best(int repeat, std::size_t bytes, F&& once) {
  double b = 0;
  for (int r = 0; r < repeat; ++r) b = std::max(b, rate(bytes, once));
  return b;
}

volatile std::uint32_t sink;

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeat") repeat = std::atoi(argv[i + 1]);
  }
  std::vector<std::byte> buf(1 << 20);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>(i * 131 + 7);

  std::printf("crc32c: in use %s (hw available: %s)\n", crc32c_impl_name(crc32c_impl()),
              crc32c_hw_available() ? "yes" : "no");
  std::printf("%-10s %10s %12s %12s %8s\n", "test", "size", "hw_MB/s", "portable_MB/s", "ratio");
  for (const std::size_t size : {32u, 64u, 512u, 4096u, 65536u, 1u << 20}) {
    const std::span<const std::byte> d(buf.data(), size);
    const double hw = best(repeat, size, [&] { sink = crc32c_hw(d); });
    const double sw = best(repeat, size, [&] { sink = crc32c_portable(d); });
    std::printf("%-10s %10zu %12.0f %12.0f %7.1fx\n", "crc32c", size, hw, sw, hw / sw);
  }

  std::printf("%-10s %10s %12s %12s\n", "test", "segment", "MB/s", "frames/s");
  for (const std::size_t size : {64u, 4096u, 65536u}) {
    const Segment seg{std::span<const std::byte>(buf.data(), size)};
    const std::size_t frames = std::max<std::size_t>(1, (1u << 20) / size);
    std::vector<std::byte> wire;
    for (std::size_t i = 0; i < frames; ++i) {
      EncodedFrame ef;
      if (!encode_frame(FrameType::message, {&seg, 1}, {}, ef)) return 1;
      for (const auto& part : ef.iov()) wire.insert(wire.end(), part.begin(), part.end());
    }
    const double enc = best(repeat, wire.size(), [&] {
      for (std::size_t i = 0; i < frames; ++i) {
        EncodedFrame ef;
        (void)encode_frame(FrameType::message, {&seg, 1}, {}, ef);
        sink = static_cast<std::uint32_t>(ef.size());
      }
    });
    const double dec = best(repeat, wire.size(), [&] {
      WireDecoder d(DecoderOptions{.local = {}, .limits = {}, .expect_banner = false});
      std::size_t got = 0;
      for (std::size_t at = 0; at < wire.size(); at += 65536) {
        std::span<const std::byte> in(wire.data() + at,
                                      std::min<std::size_t>(65536, wire.size() - at));
        while (!in.empty()) {
          if (d.feed(in) == DecodeEvent::frame) got += d.take_frame().payload_size();
        }
      }
      sink = static_cast<std::uint32_t>(got);
    });
    const double per = static_cast<double>(wire.size()) / static_cast<double>(frames);
    std::printf("%-10s %10zu %12.0f %12.0f\n", "encode", size, enc, enc * 1e6 / per);
    std::printf("%-10s %10zu %12.0f %12.0f\n", "decode", size, dec, dec * 1e6 / per);
  }
  return 0;
}
