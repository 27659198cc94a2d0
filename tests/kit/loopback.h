// The loopback Stream is the installed testing library's (rmsg/testing/loopback.h, target
// rmsg::testing); the tests include it under its old name too.
#pragma once

#include "rmsg/testing/loopback.h"
