// Data calls the C API (rmsg/socket.h) does not name but the preload interposes.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

namespace rmsg::posix {

// splice(): the kernel's, its bytes counted on a managed socket at either end.
ssize_t splice_counted(int in_fd, loff_t* in_off, int out_fd, loff_t* out_off, size_t len,
                       unsigned flags);

}  // namespace rmsg::posix
