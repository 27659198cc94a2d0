#!/bin/bash
# Builds the guest's boot image: busybox (static) as PID 1 plus the few modules that are
# needed before the host root can be mounted (virtio, 9p, overlay). Everything else,
# rdma_rxe included, is loaded later from the host's /lib/modules over 9p.
#   build-initramfs.sh KVER OUT
set -euo pipefail
kver=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
modules=(virtio_pci virtio_net 9pnet_virtio 9p overlay)

# A dynamically linked busybox would find no libc in the initramfs.
if ldd /bin/busybox >/dev/null 2>&1; then
  echo "softroce: /bin/busybox is not static (install busybox-static)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{bin,proc,sys,dev,newroot,lower,upper,ctl}
cp /bin/busybox "$tmp/bin/busybox"
: >"$tmp/modules.list"
# --show-depends prints every module a module needs, in load order.
for m in "${modules[@]}"; do
  modprobe -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
  rel=${ko#/lib/modules/"$kver"/}
  mkdir -p "$tmp/lib/modules/$kver/$(dirname "$rel")"
  cp "$ko" "$tmp/lib/modules/$kver/$rel"
  echo "$rel" >>"$tmp/modules.list"
done
cp "$here/guest-init.sh" "$tmp/init"
chmod 755 "$tmp/init"
# Write beside the target, then rename: concurrent boots never see half an image.
(cd "$tmp" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
