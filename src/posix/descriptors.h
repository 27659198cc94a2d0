// Shared by the calls that make a descriptor number refer to what another one refers to
// (dup*, fcntl(F_DUPFD*)).
#pragma once

#include "posix/runtime.h"

namespace rmsg::posix {

// `to` now refers to what `from` refers to (a managed socket, an epoll instance or
// nothing); what `to` referred to before is released.
void link_duplicate(Runtime& rt, int from, int to);

}  // namespace rmsg::posix
