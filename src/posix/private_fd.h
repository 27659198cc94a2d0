// The shim's own descriptor (RMSG_STATS's file). It lives at a high number (never 0-2,
// never the lowest free one a program expects), close-on-exec, and stays the shim's: a
// program that closes or dup2()s over its number gets the kernel's answer, the shim's file
// having moved to another number first; and before each write the shim checks that the
// number still holds the file it opened (a raw close behind its back, then the kernel
// handing the number out again, must never send a stats line into the program's socket).
#pragma once

#include "posix/runtime.h"

namespace rmsg::posix {

// Opens RMSG_STATS's file (O_APPEND, O_NOFOLLOW, close-on-exec) at a high number; nothing
// when unset or when it cannot be opened.
void open_stats_file(Runtime& rt);

// The stats file's number when it still holds the file the shim opened, else -1 (and the
// shim forgets it: its lines are lost, never misdirected). One fstat().
int checked_stats_fd(Runtime& rt);

// True when fd is the shim's own descriptor (checked as above).
bool is_private(Runtime& rt, int fd);

// When fd is the shim's own, moves the shim's file to another high number so that the
// program may close fd or take it (dup2/dup3). Where no number is free the shim gives its
// file up. Afterwards fd is the program's to use.
void move_private_away(Runtime& rt, int fd);

}  // namespace rmsg::posix
