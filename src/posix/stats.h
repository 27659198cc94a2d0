// RMSG_STATS: one JSON line per connection, appended with one write() to the file the
// environment names (O_APPEND, so lines from several processes never interleave). Lines
// come from the connection's owning process only (runtime.h: ownership), when its last
// descriptor of the connection closes, or at exit for those still open. Formatting uses
// only the stack: the close path stays async-signal-safe.
#pragma once

#include <netinet/in.h>

#include <cstddef>

#include "posix/runtime.h"

namespace rmsg::posix {

// The stats line's "peer" value ("ADDR:PORT" quoted, "[ADDR6]:PORT" quoted, or null) into
// out; returns its length (at most cap).
std::size_t format_peer(const sockaddr_in6& peer, char* out, std::size_t cap);

// The stats line's name of a fallback reason ("peer", "timeout", ...).
const char* fallback_name(Fallback f);

// A connection whose last descriptor in this process just closed.
void report_closed(Runtime& rt, const SocketObject& o);
// Every connection this process owns and still holds (at exit).
void report_open_connections(Runtime& rt);

}  // namespace rmsg::posix
