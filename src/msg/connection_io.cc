// Connections' I/O: the stream callbacks, the read loop into the wire decoder, the write
// buffer, and closing a connection for a reason (counted).
#include <array>
#include <string>
#include <utility>

#include "auth/auth_errors.h"
#include "base/nested_scratch.h"
#include "msg/messenger_impl.h"
#include "msg/vocabulary.h"
#include "rmsg/log.h"
#include "wire/frame_encoder.h"
#include "wire/message_frame.h"

namespace rmsg {
namespace {

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr int kReadsPerCallback = 16;  // then the rest is deferred: other streams get a turn

// Whether a read shorter than asked means the stream had nothing more at that moment, so
// that the read which would return would_block can be left out. True for TCP: a stream
// socket's recv returns less than asked only when its receive queue ran empty (epoll(7)),
// and TcpStream watches the socket level-triggered, so bytes that arrive after it call the
// callback again (a read that returned bytes keeps it armed, rmsg/stream.h). That spares
// one recv system call per message in request/response traffic. Not for RDMA (a read
// stops at a ring block's end with more possibly behind it, and finding the ring empty
// costs no system call there) nor for streams we do not know.
bool short_read_drains(const Stream& s) {
  const char* t = s.transport();  // compared in place: no strlen call per callback
  return t[0] == 't' && t[1] == 'c' && t[2] == 'p' && t[3] == '\0';
}

const char* messenger_errc_name(int v) {
  static constexpr std::array<const char*, 18> kNames = {
      "unknown",           "peer_restarted",   "session_unknown", "lossy_fault",  "wrong_node",
      "handshake_timeout", "unexpected_frame", "sequence_gap",    "bad_ack",      "bad_payload",
      "replaced",          "peer_closed",      "shutdown",        "idle_timeout", "bad_fragment",
      "session_expired",   "not_reading",      "duplicate_node"};
  return v > 0 && v < static_cast<int>(kNames.size()) ? kNames[v] : "unknown";
}

}  // namespace

Connection& Messenger::Impl::new_connection(Connection::Role role) {
  auto c = std::make_unique<Connection>(next_conn_id_++, role, frame_limits_);
  Connection& ref = *c;
  conns_.emplace(ref.id, std::move(c));
  return ref;
}

Connection* Messenger::Impl::find_connection_slow(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return nullptr;
  conn_cache_id_ = id;
  conn_cache_ = it->second.get();
  return conn_cache_;
}

void Messenger::Impl::watch(Connection& c) {
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = c.id;
  c.stream.on_readable([weak, id] {
    if (auto self = weak.lock()) self->on_readable(id);
  });
}

bool Messenger::Impl::read_paused(const Connection& c) {
  if (paused_sessions_ == 0 || c.state() != Connection::State::open) return false;
  const Session* s = find_session(c.peer);
  return s != nullptr && s->paused;
}

// `in` stays unchanged until this returns: the decoder borrows from it (a frame that lies
// whole in it is not copied, DecoderOptions::borrow), and each frame is handled before the
// next read.
bool Messenger::Impl::consume(ConnId id, std::span<const std::byte> in) {
  // The last frame handled, its bytes no longer in use: back to the decoder, whose next
  // frame then needs no allocation.
  msg::Frame done;
  if (owns_) keep_transcript(id, in);  // several shards: a hello may need relaying
  while (!in.empty()) {
    Connection* c = find_connection(id);
    if (c == nullptr) return false;
    if (done.owns_storage()) c->decoder->recycle(std::move(done));
    if (read_paused(*c)) {
      // Bytes read but not decoded wait for set_paused(false) (a request past the bound
      // stays in the stream's buffers, not ours).
      c->stash.insert(c->stash.end(), in.begin(), in.end());
      c->stream.on_readable({});  // set_paused(false) watches it again
      return false;
    }
    const msg::DecodeEvent ev = c->decoder->feed(in);
    if (ev == msg::DecodeEvent::error) {
      fail(id, c->decoder->error());
      return false;
    }
    if (ev == msg::DecodeEvent::banner) {
      on_banner(*c);  // session_auth.cc: the peer's banner bytes are valid only now
      continue;
    }
    if (ev != msg::DecodeEvent::frame) continue;
    msg::Frame f = c->decoder->take_frame();
    if (c->state() == Connection::State::retired) continue;  // replaced: nothing delivered
    if (c->state() == Connection::State::open) {
      on_open_frame(*c, f);
    } else {
      on_handshake_frame(*c, f);
    }
    if (f.owns_storage()) done = std::move(f);  // a borrowed frame has nothing to give back
  }
  Connection* c = find_connection(id);
  if (c == nullptr) return false;
  if (done.owns_storage()) c->decoder->recycle(std::move(done));
  return true;
}

void Messenger::Impl::on_readable(ConnId id) {
  // One buffer per nesting depth: a callback that runs the loop re-enters here (for another
  // connection) while the frames decoded below still point into this call's buffer.
  const NestedScratch<kReadChunk> scratch;
  const std::span<std::byte> buf = scratch.span();
  if (Connection* c = find_connection(id); c != nullptr) {
    if (read_paused(*c)) {
      c->stream.on_readable({});  // set_paused(false) watches it again
      return;
    }
    if (!c->stash.empty()) {
      const std::vector<std::byte> stash = std::move(c->stash);
      c->stash.clear();
      if (!consume(id, stash)) return;
    }
  }
  bool drains = false;
  for (int round = 0; round < kReadsPerCallback; ++round) {
    Connection* c = find_connection(id);
    if (c == nullptr) return;
    if (round == 0) drains = short_read_drains(c->stream);
    if (read_paused(*c)) {  // a frame just handled paused it: read no more
      c->stream.on_readable({});
      return;
    }
    auto n = c->stream.read(buf);
    if (!n) {
      if (n.is(Errc::would_block)) return;
      return fail(id, n.error());
    }
    c->last_rx = loop_.now();
    if (n.value() == 0) {
      const bool torn = c->decoder->finish() == msg::DecodeEvent::error;
      return fail(id, torn ? c->decoder->error() : make_error_code(MessengerErrc::peer_closed));
    }
    if (!consume(id, std::span<const std::byte>(buf.data(), n.value()))) return;
    if (drains && n.value() < buf.size()) return;  // nothing more was there (see above)
  }
  // More may be waiting: come back after the loop served the others.
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak, id] {
    if (auto self = weak.lock()) self->on_readable(id);
  });
}

bool Connection::queue_frame(msg::FrameType type, std::span<const msg::Segment> segments) {
  compact();
  const std::size_t size = msg::encoded_frame_size(segments);
  const std::size_t old = out_.size();
  out_.resize(old + size);
  auto r = msg::encode_frame_to(std::span(out_).subspan(old), type, segments, *limits_);
  if (!r) {
    out_.resize(old);
    return false;
  }
  return true;
}

bool Connection::queue_message(const msg::MessageHeader& h, std::span<const std::byte> payload) {
  if (!msg::message_frame_fits(payload.size(), *limits_)) return false;
  compact();
  const std::size_t old = out_.size();
  out_.resize(old + msg::kMessageFrameOverhead + payload.size());
  msg::encode_message_frame(out_.data() + old, h, payload);
  return true;
}

bool Connection::queue_control(msg::FrameType type, std::span<const std::byte> payload) {
  const msg::Segment seg{payload, 0};
  return queue_frame(type, std::span(&seg, payload.empty() ? 0 : 1));
}

void Messenger::Impl::flush(Connection& c) {
  const ConnId id = c.id;
  while (c.pending_bytes() > 0) {
    auto n = c.stream.write(c.unwritten());
    if (!n) {
      if (!n.is(Errc::would_block)) return fail(id, n.error());
      std::weak_ptr<Impl> weak = weak_from_this();
      c.stream.on_writable([weak, id] {
        auto self = weak.lock();
        if (!self) return;
        Connection* cc = self->find_connection(id);
        if (cc == nullptr) return;
        cc->stream.on_writable({});
        self->flush(*cc);
        cc = self->find_connection(id);
        if (cc == nullptr || cc->state() != Connection::State::open) return;
        if (Session* s = self->find_session(cc->peer); s != nullptr && s->conn() == id) {
          self->pump(*s);
        }
      });
      return;
    }
    c.wrote(n.value());
  }
}

void Messenger::Impl::count_error(std::error_code why) {
  std::string name = "msg.errors.";
  if (why.category() == messenger_category()) {
    name += messenger_errc_name(why.value());
  } else if (why.category() == auth::auth_category()) {
    name += auth::auth_errc_name(why.value());
  } else if (why.category() == msg::wire_category()) {
    name += msg::wire_errc_name(static_cast<msg::WireErrc>(why.value()));
  } else {
    name += "stream";
  }
  counters_.counter(name).add_owned();
}

void Messenger::Impl::fail(ConnId id, std::error_code why) {
  Connection* c = find_connection(id);
  if (c == nullptr) return;
  if (c->state() == Connection::State::retired) return drop(id, false);  // expected to end
  count_error(why);
  RMSG_LOG(info, "msg: node %llx: connection %llu (peer %llx) closed: %s (%s)",
           static_cast<unsigned long long>(options_.node_id), static_cast<unsigned long long>(id),
           static_cast<unsigned long long>(c->peer), why.message().c_str(), why.category().name());
  Session* s = c->peer != 0 ? find_session(c->peer) : nullptr;
  drop(id, false);
  if (s == nullptr) return;
  if (s->conn() == id) {
    connection_lost(*s, why);
  } else if (s->outbound() == id) {
    attempt_failed(*s, why);
  }
}

void Messenger::Impl::drop(ConnId id, bool graceful) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::unique_ptr<Connection> c = std::move(it->second);
  conns_.erase(it);
  if (conn_cache_id_ == id) {
    conn_cache_id_ = 0;
    conn_cache_ = nullptr;
  }
  c->cancel_timers(loop_);
  probe_ended(*c);
  release_slot(*c);
  handshake_done(*c);
  if (graceful) {
    // Failing, the close below is abortive (the peer reads a reset, not our close frame's EOF).
    if (auto r = c->stream.shutdown_write(); !r) {
      RMSG_LOG(debug, "messenger: shutdown_write: %s", r.error().message().c_str());
    }
  }
  c->stream.close();
}

}  // namespace rmsg
