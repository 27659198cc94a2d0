"""The import check: every socket or descriptor call (descriptor_calls.txt) that a program
of these tests imports is either exported by librmsg-preload.so or listed, with a reason,
in passthrough.txt. Read with `objdump -T` from the installed Debian programs and every
shared object they load (ldd; for Python, the extension modules that the echo scripts'
imports load, read from /proc/PID/maps), so a new Debian build that imports a new call
fails here until someone decides what the shim does with it.

    imports_test.py --preload build/lib/librmsg-preload.so

glibc's own objects (libc, ld.so, libm, ...) are not read: their calls to each other do
not go through the PLT, so no preload library can see them, and that is the kernel's
business (getaddrinfo's DNS sockets, for one). Also fails when passthrough.txt lists a
call that the library exports (the list would lie) or one that is no descriptor call,
or an entry without a reason.
"""

import argparse
import fnmatch
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ["/usr/bin/iperf3", "/usr/bin/redis-server", "/usr/bin/redis-cli",
            "/usr/bin/redis-benchmark", "/usr/bin/python3", "/usr/bin/sha256sum"]
# What the echo scripts import (echo_server.py, echo_client.py), and what they load.
PYTHON_IMPORTS = "import asyncio, asyncio.subprocess, concurrent.futures, hashlib, random, " \
                 "selectors, socket, struct, subprocess, traceback"
GLIBC = re.compile(r"/(libc|ld-linux-x86-64|libm|libpthread|libdl|librt|libresolv|"
                   r"libutil|libanl|libnsl)[.-]")


def entries(path):
    """Lines of a list file without comments; each split into (name, rest)."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, rest = line.partition(" ")
                out.append((name, rest.strip()))
    return out


def dynamic_symbols(path, undefined):
    """Function symbols objdump -T lists as imported (undefined) or exported by `path`."""
    out = subprocess.run(["objdump", "-T", path], check=True, capture_output=True, text=True)
    names = set()
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) < 6 or "DF" not in fields:
            continue
        is_und = "*UND*" in fields
        if is_und == undefined:
            names.add(fields[-1])
    return names


def ldd(path):
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    return [m.group(1) for m in re.finditer(r"=> (/\S+)", out)]


def python_modules():
    code = PYTHON_IMPORTS + "\nprint('\\n'.join(sorted({l.split()[-1] for l in " \
        "open('/proc/self/maps') if l.rstrip().endswith('.so') or '.so.' in l})))"
    out = subprocess.run(["/usr/bin/python3", "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return [p for p in out.split() if p.startswith("/")]


def objects():
    """Each object read, with the programs that load it."""
    users = {}
    for prog in PROGRAMS:
        real = os.path.realpath(prog)
        loaded = [real] + ldd(real)
        if os.path.basename(real).startswith("python3"):
            loaded += python_modules()
        for obj in loaded:
            obj = os.path.realpath(obj)
            if not GLIBC.search(obj):
                users.setdefault(obj, set()).add(os.path.basename(prog))
    return users


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preload", required=True)
    args = parser.parse_args()
    if not os.path.exists(args.preload):
        print(f"FAIL: no preload library at {args.preload}")
        return 1
    patterns = [name for name, _ in entries(os.path.join(HERE, "descriptor_calls.txt"))]
    passthrough = dict(entries(os.path.join(HERE, "passthrough.txt")))
    exported = dynamic_symbols(args.preload, undefined=False)
    is_call = lambda name: any(fnmatch.fnmatchcase(name, p) for p in patterns)  # noqa: E731

    imported = {}
    for obj, progs in sorted(objects().items()):
        for name in dynamic_symbols(obj, undefined=True):
            if is_call(name):
                imported.setdefault(name, set()).add(f"{os.path.basename(obj)}"
                                                     f" ({', '.join(sorted(progs))})")
    problems = []
    for name, reason in sorted(passthrough.items()):
        if not reason:
            problems.append(f"passthrough.txt: {name} has no reason")
        if name in exported:
            problems.append(f"passthrough.txt: {name} is listed, but the library exports it")
        if not is_call(name):
            problems.append(f"passthrough.txt: {name} is not in descriptor_calls.txt")
    print(f"{len(imported)} socket or descriptor calls imported; "
          f"{len(exported)} symbols exported by {os.path.basename(args.preload)}")
    for name in sorted(imported):
        if name in exported:
            state = "interposed"
        elif name in passthrough:
            state = "passed through: " + passthrough[name]
        else:
            state = "NEITHER interposed NOR listed in passthrough.txt"
            problems.append(f"{name}: imported by {', '.join(sorted(imported[name]))}, "
                            f"neither interposed nor passed through")
        print(f"  {name:22} {state}")
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
