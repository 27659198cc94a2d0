#!/bin/busybox sh
# PID 1 of the initramfs (busybox). Mounts the host root read-only (9p tag "hostroot")
# under a tmpfs overlay, the control folder (tag "ctl") and the read-write shares
# (tags share0..N at their host paths), then switch_roots into the host userland, where
# guest-main.sh sets up Soft-RoCE, runs the command and powers off.
# No `set -e`: a failure must end in a message and a power-off (die), never a panic.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
kver=$(uname -r)
while read -r m; do
  insmod "/lib/modules/$kver/$m" || echo "softroce-init: insmod $m failed"
done </modules.list

opts="trans=virtio,version=9p2000.L,msize=512000"
die() {
  echo "softroce-init: $*"
  sync
  poweroff -f
}
mount -t 9p -o "$opts,cache=mmap" ctl /ctl || die "cannot mount the control folder"
. /ctl/env
mount -t 9p -o "$opts,ro,cache=loose" hostroot /lower || die "cannot mount the host root"
mount -t tmpfs -o size=50% tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay /newroot ||
  die "cannot mount the overlay root"

r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts devpts $r/dev/pts
mount -t tmpfs tmpfs $r/dev/shm
mount -t tmpfs tmpfs $r/tmp
mount -t tmpfs tmpfs $r/run
mkdir -p $r/run/softroce
mount --bind /ctl $r/run/softroce
i=0
for path in $SHARES; do
  mkdir -p "$r$path"
  mount -t 9p -o "$opts,cache=mmap" "share$i" "$r$path" || die "cannot mount $path"
  i=$((i + 1))
done
# switch_root makes the host userland PID 1's root, so that the kernel's helpers
# (request_module -> /sbin/modprobe) find the host's modules and tools.
exec switch_root $r /bin/bash /run/softroce/guest-main.sh
