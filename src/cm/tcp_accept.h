// The connection manager's TCP accepts: admission (ConnectionLimit), routing by the first
// bytes (TcpRouter, when AcceptRouting::read_affinity is set), and the Stream each
// connection becomes on the loop that takes it, holding its lease. Loop-thread-only but
// for make_tcp_adopt's result, which runs on the target's loop.
#pragma once

#include <memory>

#include "cm/connection_limit.h"
#include "cm/manager_stats.h"
#include "cm/tcp_target.h"
#include "rmsg/connection_manager.h"

namespace rmsg::cm {

// Listens on `address`. Each accepted socket takes a lease from `limit` (none left: reset
// at once, limit.accepts_rejected; the limit gone: counted against nothing), then is
// routed (routing.read_affinity set; `own` is this manager's target) or becomes a Stream
// for `on_accept` at once.
Result<Listener> listen_tcp(EventLoop& loop, const SocketAddress& address,
                            const ConnectionParams& params, AcceptCallback on_accept,
                            AcceptRouting routing, std::weak_ptr<ConnectionLimit> limit,
                            std::weak_ptr<ManagerStats> stats, std::shared_ptr<TcpTarget> own);

// A TcpTarget's adopt for the manager on `loop`: the socket becomes a Stream there (with
// `options`), holding its lease, for `on_accept` (routing.adopted); with the manager gone
// (`stats` expired) it is closed instead.
TcpTarget::Adopt make_tcp_adopt(EventLoop& loop, const TcpOptions& options,
                                AcceptCallback on_accept, std::weak_ptr<ManagerStats> stats);

}  // namespace rmsg::cm
