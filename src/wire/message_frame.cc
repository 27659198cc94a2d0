// The message frame in one pass (message_frame.h).
#include "wire/message_frame.h"

#include <cstring>

#include "wire/crc32c.h"
#include "wire/frame_bytes.h"

namespace rmsg::wire {

void encode_message_frame(std::byte* out, const MessageHeader& h,
                          std::span<const std::byte> payload) noexcept {
  using wire::store_le;
  // Preamble (frame.h): type, flags 0, two segments, key phase 0; the lengths; no
  // alignments; its CRC at the end.
  store_le<std::uint32_t>(out, static_cast<std::uint32_t>(FrameType::message) | 2u << 16);
  store_le<std::uint32_t>(out + 4, MessageHeader::kSize);
  store_le<std::uint32_t>(out + 8, static_cast<std::uint32_t>(payload.size()));
  store_le<std::uint64_t>(out + 12, 0);  // lengths 3 and 4
  store_le<std::uint64_t>(out + 20, 0);  // the four alignments
  // Segment 0: the header (session_frames.h; bytes 22..23 reserved, 0).
  std::byte* head = out + kPreambleSize;
  store_le<std::uint64_t>(head, h.seq);
  store_le<std::uint64_t>(head + 8, h.ack);
  store_le<std::uint32_t>(head + 16, h.flags);
  store_le<std::uint32_t>(head + 20, h.service);
  // Segment 1: the payload; then the epilogue, one CRC per segment.
  std::byte* body = head + MessageHeader::kSize;
  if (!payload.empty()) std::memcpy(body, payload.data(), payload.size());
  // The three CRCs in one call (crc32c_each).
  const std::span<const std::byte> parts[3] = {
      {out, kPreambleCrcOffset}, {head, MessageHeader::kSize}, payload};
  std::uint32_t crcs[3];
  crc32c_each(parts, crcs);
  store_le<std::uint32_t>(out + kPreambleCrcOffset, crcs[0]);
  std::byte* epilogue = body + payload.size();
  store_le<std::uint32_t>(epilogue, crcs[1]);
  store_le<std::uint32_t>(epilogue + kSegmentCrcSize, crcs[2]);
}

}  // namespace rmsg::wire
