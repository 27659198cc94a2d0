// RMSG_STATS: one JSON line per connection, appended with one write() to the file the
// environment names (O_APPEND, so lines from several processes never interleave). Lines
// come from the connection's owning process only (runtime.h: ownership), when its last
// descriptor of the connection closes, or at exit for those still open. Formatting uses
// only the stack: the close path stays async-signal-safe.
#pragma once

#include "posix/runtime.h"

namespace rmsg::posix {

// A connection whose last descriptor in this process just closed.
void report_closed(Runtime& rt, const SocketObject& o);
// Every connection this process owns and still holds (at exit).
void report_open_connections(Runtime& rt);

}  // namespace rmsg::posix
