// RMSG_EXPORT marks what librmsg exports: the types and functions declared in include/rmsg/.
// librmsg is compiled with hidden visibility, so a name without it stays inside the library
// (tests/install/exports_check.sh compares librmsg.so's dynamic symbols with an allowlist).
// A consumer sees the same attribute, which for an imported name changes nothing.
#ifndef RMSG_EXPORT_H
#define RMSG_EXPORT_H

#define RMSG_EXPORT __attribute__((visibility("default")))
// On a public class's opaque nested type (Impl, Front, State): its members stay inside
// librmsg although the enclosing class is exported.
#define RMSG_HIDDEN __attribute__((visibility("hidden")))

#endif
