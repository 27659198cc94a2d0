// The admin endpoint's Unix socket: the checks before it listens, and the listening socket.
#pragma once

#include <string>

#include "rmsg/result.h"

namespace rmsg::admin {

// A non-blocking listening Unix stream socket at `path`, mode 0600, after the checks of
// AdminEndpoint::start (include/rmsg/admin.h). The caller owns the fd.
Result<int> listen_unix(const std::string& path);

}  // namespace rmsg::admin
