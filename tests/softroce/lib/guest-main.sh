#!/bin/bash
# PID 1 of the guest once the host userland is its root. Brings up eth0 and a Soft-RoCE
# device (rdma_rxe) on it, waits until its port is ACTIVE, runs the command with its
# stdout/stderr on virtio-serial ports, writes the exit status to the control folder and
# powers off. No `set -e`: every path must end in a reported status and a power-off.
ctl=/run/softroce
. "$ctl/env"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb

uptime_s() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[softroce $(uptime_s)] $*"; }   # goes to the console (ttyS0 -> console.log)
finish() {
  echo "$1" >"$ctl/rc"
  log "exit status $1"
  sync
  echo o >/proc/sysrq-trigger
  sleep 30 2>/dev/null # the power-off is asynchronous; PID 1 must not exit (kernel panic) meanwhile
}
fail() {
  log "SETUP FAILED: $*"
  echo "softroce: guest setup failed: $*" >"$err"
  finish 125
}

# The command's stdout/stderr travel over virtio-serial ports (a UART is far too slow).
modprobe virtio_console
port() {
  local p
  for p in /sys/class/virtio-ports/*; do
    [ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && { echo "/dev/${p##*/}"; return; }
  done
  echo /dev/console
}
out=$(port softroce.out)
err=$(port softroce.err)
log "userland reached"
uptime_s >"$ctl/t_userland"

ulimit -l unlimited   # registered memory is pinned
ip link set lo up
ip link set eth0 mtu "$MTU" up || fail "no eth0"
ip addr add "$IP/24" dev eth0 || fail "cannot set $IP on eth0"
for m in ib_uverbs rdma_ucm rdma_rxe; do
  modprobe "$m" || fail "modprobe $m (is the kernel's rdma_rxe module installed?)"
done
log "modules loaded"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0 type rxe netdev eth0"
log "rxe0 added"

# The port turns ACTIVE once the netdev's carrier is up; poll until then or a deadline.
state=/sys/class/infiniband/rxe0/ports/1/state
deadline=$(($(cut -d. -f1 /proc/uptime) + 20))
until grep -q ACTIVE "$state" 2>/dev/null; do
  [ "$(cut -d. -f1 /proc/uptime)" -lt "$deadline" ] || fail "rxe0 port 1 not ACTIVE: $(cat "$state" 2>&1)"
  sleep 0.05
done
log "rdma: $(rdma link show 2>&1 | tr '\n' ' ')"
uptime_s >"$ctl/t_ready"

export RMSG_RDMA_ADDR=$IP RMSG_RDMA_DEVICE=rxe0
[ -n "${PEER_IP:-}" ] && export RMSG_RDMA_PEER_ADDR=$PEER_IP RMSG_RDMA_ROLE=$ROLE
. "$ctl/passenv"
cd "$CWD" || fail "cd $CWD"
eval "set -- $(cat "$ctl/cmd")"
"$@" </dev/null >"$out" 2>"$err"
rc=$?
uptime_s >"$ctl/t_done"
if [ "$rc" != 0 ]; then
  log "command failed; kernel log tail:"
  dmesg | tail -n 15
fi
finish "$rc"
