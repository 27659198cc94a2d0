// RdmaStream: control path — the CM delegate (the resource seam, handshake private data,
// negotiation), completion-channel watching, close and teardown.
#include <atomic>
#include <cerrno>
#include <utility>

#include "base/debug_assert.h"
#include "loop/loop_thread.h"
#include "rdma/rdma_acceptor.h"
#include "rdma/rdma_stream.h"
#include "rdma/seams.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

std::uint32_t advertised_features() {
  const SetupHooks* hooks = setup_hooks.load(std::memory_order_acquire);
  return wire::kKnownFeatures | (hooks != nullptr ? hooks->extra_features() : 0);
}

constexpr int kRejectConsumerDefined = 28;  // IB CM: rejected by the peer application
constexpr int kRejectInvalidServiceId = 8;  // IB CM: nothing listens on that port

rdmacm::CmTuning tuning_from(const RdmaOptions& o) {
  return rdmacm::CmTuning{o.retry_count, o.rnr_retry_count, o.ack_timeout, o.resolve_timeout,
                          o.connect_timeout};
}

std::string address_string(const sockaddr* sa) {
  if (sa == nullptr || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return {};
  const socklen_t len = sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  return SocketAddress::from_sockaddr(sa, len).to_string();
}

}  // namespace

Result<std::unique_ptr<RdmaStream>> RdmaStream::create(EventLoop& loop, const RdmaOptions& options,
                                                       ResourceHooks hooks, Lease lease) {
  auto geometry = geometry_from(options);
  if (!geometry) return geometry.error();
  auto channel = rdmacm::CmChannel::for_loop(loop);
  if (!channel) return channel.error();
  // Shared receive only on structures of our own: a connection manager (the one user of
  // `release`) pools ring structures.
  const bool shared = options.shared_receive && !hooks.release;
  if (!hooks.acquire) hooks = default_resource_hooks(loop);
  std::unique_ptr<RdmaStream> s(new RdmaStream(loop, options, geometry.value(), std::move(hooks),
                                               std::move(lease), std::move(channel).value()));
  if (shared) s->advertised_ |= wire::kFeatureSharedReceive;
  return s;
}

RdmaStream::RdmaStream(EventLoop& loop, const RdmaOptions& options, const Geometry& geometry,
                       ResourceHooks hooks, Lease lease, std::shared_ptr<rdmacm::CmChannel> channel)
    : loop_(loop),
      options_(options),
      geometry_(geometry),
      hooks_(std::move(hooks)),
      lease_(std::move(lease)),
      channel_(std::move(channel)),
      advertised_(advertised_features()) {}

RdmaStream::~RdmaStream() {
  close();
  if (conn_ == ConnState::lingering) static_cast<void>(end_linger().release());  // not self-owned
  alive_.end();
}

Result<void> RdmaStream::start_connect(const SocketAddress& peer, SetupDone done) {
  setup_done_ = std::move(done);
  cm_ = std::make_unique<rdmacm::CmConnection>(channel_, static_cast<Delegate&>(*this),
                                               tuning_from(options_));
  if (hooks_.on_step) cm_->set_observer(hooks_.on_step);
  return cm_->connect(peer);
}

Result<void> RdmaStream::start_accept(const rdma_cm_event& request, const wire::Hello& peer,
                                      SetupDone done) {
  return start_accept(verbs::CmId(request.id), rdmacm::cm_private_data(request), peer,
                      std::move(done));
}

Result<void> RdmaStream::start_accept(verbs::CmId id, std::span<const std::byte> request,
                                      const wire::Hello& peer, SetupDone done) {
  passive_ = true;
  setup_done_ = std::move(done);
  // Shared receive when both offer it; per-stream rings otherwise (docs/protocol.md).
  if ((peer.features & wire::kFeatureSharedReceive) == 0) {
    advertised_ &= ~wire::kFeatureSharedReceive;
  } else if ((advertised_ & wire::kFeatureSharedReceive) != 0) {
    if (auto joined = join_pool(id->verbs); !joined) {
      reject_request(channel_.get(), std::move(id), wire::RejectReason::resources);
      return joined.error();
    }
  }
  negotiate(peer);
  cm_ = std::make_unique<rdmacm::CmConnection>(channel_, static_cast<Delegate&>(*this),
                                               tuning_from(options_));
  if (hooks_.on_step) cm_->set_observer(hooks_.on_step);
  return cm_->accept(std::move(id), request);
}

std::atomic<const SetupHooks*> setup_hooks{nullptr};

void RdmaStream::negotiate(const wire::Hello& peer) {
  features_ = advertised_ & peer.features;
  max_message_ = std::min(geometry_.send_block_size, peer.recv_block_size);
  // The passive side negotiates before it has resources, the active side after:
  // cm_acquire sets the limit too.
  inline_limit_ = std::min(res_ ? res_->inline_granted : 0u, max_message_);
  peer_recv_blocks_ = peer.recv_block_count;
  if (pool_ && leasing()) {  // both in the mode: windows grow up to the recv_windows
    window_lease_.reset(geometry_.recv_block_count, geometry_.recv_window);
    credits_.reset(peer.recv_block_count, geometry_.recv_block_count, peer.recv_window,
                   geometry_.recv_window);
    return;
  }
  credits_.reset(peer.recv_block_count, geometry_.recv_block_count);
}

Result<ibv_qp*> RdmaStream::cm_acquire(rdma_cm_id* id, std::span<const std::byte> /*peer*/) {
  if (!passive_ && (advertised_ & wire::kFeatureSharedReceive) != 0) RMSG_TRY(join_pool(id->verbs));
  auto res = pool_ ? create_conn_resources(loop_, id->verbs, geometry_, pool_->pd(), pool_->srq())
                   : hooks_.acquire(id, geometry_);
  if (!res) return res.error();
  res_ = std::move(res).value();
  inline_limit_ = std::min(res_->inline_granted, max_message_);  // 0 until negotiated
  const SetupHooks* hooks = setup_hooks.load(std::memory_order_acquire);
  const RingStart start = hooks != nullptr ? hooks->ring_start() : RingStart{};
  if (start.generation) res_->generation = *start.generation;
  res_->generation = next_generation(res_->generation);
  send_ring_.reset(geometry_.send_block_count, geometry_.sq_depth(), start.send_block,
                   start.send_slot);
  if (!pool_) recv_ring_.reset(geometry_.recv_block_count);  // else: join_pool's slots
  RMSG_TRY(watch_completions());
  RMSG_TRY(watch_device(id));
  wire::Hello h;
  h.kind = passive_ ? wire::HelloKind::accept : wire::HelloKind::request;
  h.recv_block_size = geometry_.recv_block_size;
  h.recv_block_count = geometry_.recv_block_count;
  h.send_block_size = geometry_.send_block_size;
  h.send_block_count = geometry_.send_block_count;
  h.inline_size = res_->inline_granted;
  h.epoch = res_->epoch();
  h.features = advertised_;
  h.recv_window = geometry_.recv_window;  // sent with the shared-receive bit only
  if (!passive_) h.affinity = hooks_.affinity;
  hello_ = wire::encode_hello(h);
  return res_->qp.get();
}

Result<void> RdmaStream::cm_post_receives() {
  if (pool_) return {};  // the pool's blocks are posted; join_pool reserved our window
  for (std::uint32_t i = 0; i < geometry_.recv_block_count; ++i) {
    RMSG_TRY(repost(i, /*owed=*/false));  // the peer's starting credits
  }
  return {};
}

std::span<const std::byte> RdmaStream::cm_private_data() {
  return hello_;
}

Result<void> RdmaStream::cm_check_reply(std::span<const std::byte> peer) {
  auto hello = wire::decode_hello(peer);
  if (!hello) return hello.error();
  if (hello->kind != wire::HelloKind::accept) return Errc::protocol_error;
  negotiate(hello.value());
  return {};
}

std::error_code RdmaStream::cm_rejected(int status, std::span<const std::byte> data) {
  if (status == kRejectInvalidServiceId) return make_error_code(Errc::connection_refused);
  if (status == kRejectConsumerDefined) {
    auto hello = wire::decode_hello(data);
    if (hello.is(Errc::version_mismatch)) return hello.error();
    if (hello && hello->kind == wire::HelloKind::reject) {
      switch (hello->reason) {
        case wire::RejectReason::version:
          return make_error_code(Errc::version_mismatch);
        case wire::RejectReason::malformed:
          return make_error_code(Errc::protocol_error);
        case wire::RejectReason::resources:
          return make_error_code(Errc::resource_exhausted);
        case wire::RejectReason::none:
          break;
      }
    }
  }
  RMSG_LOG(info, "rdma connect rejected, CM status %d", status);
  return make_error_code(Errc::rejected);
}

void RdmaStream::cm_established() {
  enter(ConnState::established);
  flush_control();
  start_liveness();
  finish_setup({});
  changed();
}

void RdmaStream::cm_failed(std::error_code ec) {
  fail(ec);
  if (ec == Errc::device_error) drop_device_resources();  // DEVICE_REMOVAL
}

void RdmaStream::cm_disconnected() {
  if (res_ && !qp_error_) poll_recv_cq();  // what arrived before the peer's disconnect
  if (!error_) {
    if (rx_ != RxState::open) {
      rx_ = RxState::gone;
    } else {
      fail(make_error_code(Errc::connection_reset));
    }
  }
  move_qp_to_error();
  changed();
  if (conn_ == ConnState::lingering) schedule_linger_end();
}

// The one place ConnState changes (stream_state.h has the diagram).
void RdmaStream::enter(ConnState to) {
  RMSG_DEBUG_ASSERT(valid_transition(conn_, to));
  if (!valid_transition(conn_, to)) {
    RMSG_LOG(warn, "rdma stream: invalid transition %s -> %s", state_name(conn_), state_name(to));
    return;
  }
  RMSG_LOG(debug, "rdma stream: %s -> %s", state_name(conn_), state_name(to));
  conn_ = to;
}

void RdmaStream::finish_setup(std::error_code ec) {
  if (!setup_done_) return;
  loop_.defer([this, alive = alive_.token(), ec] {
    if (!alive.alive() || !setup_done_) return;
    auto done = std::move(setup_done_);
    setup_done_ = {};
    done(ec);  // may destroy this stream
  });
}

// The CQs are armed by the loop before it sleeps (arm_completions, EventLoop::add_poller):
// while the loop spins or stays busy, completions raise no event at all. Their events
// come through the loop's completion channel for the device (CompletionChannel).
Result<void> RdmaStream::watch_completions() {
  res_->send_sink.on_event = [this] { on_cq_event(true); };
  res_->recv_sink.on_event = [this] { on_cq_event(false); };
  send_armed_ = false;
  recv_armed_ = false;
  poller_ =
      loop_.add_poller([this] { return poll_from_loop(); }, [this] { return arm_completions(); });
  return {};
}

void RdmaStream::unwatch_completions() {
  res_->send_sink.on_event = {};
  res_->recv_sink.on_event = {};
  if (poller_ != 0) loop_.remove_poller(std::exchange(poller_, 0));
}

// The channel read one event of this CQ: an armed CQ raises one and is then disarmed; the
// loop re-arms before it sleeps.
void RdmaStream::on_cq_event(bool send) {
  (send ? res_->send_cq : res_->recv_cq).note_events(1);
  (send ? send_armed_ : recv_armed_) = false;
  poll_completions();
}

// The receive CQ is always armed before a sleep (data, credits, FIN and errors arrive
// there; a QP in error flushes its receives there too). The send CQ only when a sender
// waits for a completion: a writer out of blocks or SQ slots, a FIN or window probe in
// flight, a stream not plainly established. Otherwise send completions are reaped when a
// write needs their blocks or in any other poll, and cost no event.
bool RdmaStream::arm_completions() {
  if (!res_) return false;
  bool armed = false;
  auto arm = [&](verbs::Cq& cq, bool& flag) {
    if (flag) return;
    if (const int rc = ibv_req_notify_cq(cq.get(), 0); rc != 0) return fail(errno_code(rc));
    flag = true;
    armed = true;
  };
  arm(res_->recv_cq, recv_armed_);
  if (wants_send_completions()) arm(res_->send_cq, send_armed_);
  return armed;
}

bool RdmaStream::wants_send_completions() const {
  if (send_ring_.in_flight() == 0) return false;
  // Staged bytes wait for credits (the receive CQ) or for SQ slots (a send completion).
  const bool blocked =
      send_ring_.free_blocks() == 0 || sq_free() < 2 || send_ring_.staged_blocks() > 0;
  return blocked || !established() || tx_ != TxState::open || !send_ring_.marked_done() ||
         qp_error_;
}

void RdmaStream::move_qp_to_error() {
  if (!res_ || qp_error_) return;
  qp_error_ = true;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (const int rc = ibv_modify_qp(res_->qp.get(), &attr, IBV_QP_STATE); rc != 0) {
    RMSG_LOG(warn, "rdma: QP to ERR failed: %d", rc);
  }
}

void RdmaStream::release_resources(verbs::CmId old_id, bool timewait_exited, bool was_established) {
  if (!res_) return;
  if (!hooks_.release) {
    res_.reset();
    return;
  }
  // A peer's disconnect leaves the QP sound; any other error may have come from the QP.
  const bool reusable = was_established && (!error_ || error_ == Errc::connection_reset ||
                                            error_ == Errc::peer_closed);
  hooks_.release(
      {std::move(res_), reusable, std::move(old_id), timewait_exited, static_cast<bool>(error_)});
}

void RdmaStream::close() {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return;
  const bool was_established = conn_ == ConnState::established || conn_ == ConnState::failed;
  on_readable_ = {};
  on_writable_ = {};
  setup_done_ = {};
  const bool graceful = conn_ == ConnState::established && !error_ && !qp_error_ && res_ &&
                        (tx_ == TxState::fin_pending || tx_ == TxState::fin_sent) &&
                        options_.linger_timeout.count() > 0;
  if (graceful) return start_linger();
  teardown(was_established);
}

// What close() releases; a lingering stream comes here when the linger ends.
void RdmaStream::teardown(bool was_established) {
  enter(ConnState::closed);
  stop_liveness();
  async_.reset();
  if (res_) unwatch_completions();
  // Under a connection manager the old id goes with the structure (kept to TIMEWAIT_EXIT).
  verbs::CmId old_id;
  const bool timewait_exited = cm_ && cm_->timewait_exited();
  if (cm_ && hooks_.release) old_id = cm_->release_id();
  cm_.reset();  // rdma_disconnect (the peer sees DISCONNECTED), id retired
  RMSG_LOG(debug, "rdma stream: disconnected");
  move_qp_to_error();
  leave_pool();  // after ERR: RESET, then the pool takes back what the QP held
  release_resources(std::move(old_id), timewait_exited, was_established);
  pool_.reset();  // after the QP on its SRQ
  RMSG_LOG(debug, "rdma stream: structure released");
  lease_.reset();  // a manager's count of live connections ends here
  alive_.end();    // deferred tasks of this stream become no-ops
}

std::error_code RdmaStream::error() const {
  if (error_) return error_;
  if (closed()) return make_error_code(Errc::closed);
  return {};
}

std::string RdmaStream::local_address() const {
  return cm_ && cm_->id() ? address_string(rdma_get_local_addr(cm_->id())) : std::string();
}

std::string RdmaStream::peer_address() const {
  return cm_ && cm_->id() ? address_string(rdma_get_peer_addr(cm_->id())) : std::string();
}

RdmaStreamInfo RdmaStream::info() const {
  RdmaStreamInfo i = stats_;
  i.max_message = max_message_;
  i.inline_granted = res_ ? res_->inline_granted : 0;
  i.credits = credits_.available();
  i.peer_recv_blocks = peer_recv_blocks_;
  i.shared_receive = pool_ != nullptr;
  i.recv_window = pool_ ? window_lease_.window() : 0;
  return i;
}

}  // namespace rmsg::rdma
