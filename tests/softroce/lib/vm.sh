# Sourced by ../run: boots one qemu guest (TCG) that runs a command and powers off.
# The caller sets: softroce_dir kernel initrd timeout mem smp mtu verbose shares[]
# passenv_file.
# shellcheck disable=SC2154

# vm_boot NAME IP NETDEV PEER_IP ROLE -- CMD...
#   NETDEV is a qemu -netdev spec with id=n0. Prints the command's stdout/stderr on ours;
#   returns its status, 124 on timeout, 125 when the guest could not run it.
vm_boot() {
  local name=$1 ip=$2 netdev=$3 peer_ip=$4 role=$5
  shift 6
  local ctl
  ctl=$(mktemp -d "${TMPDIR:-/tmp}/softroce-$name.XXXXXX") || return 125
  # A subshell keeps this guest's traps and helpers apart from a concurrent one's.
  (
    trap 'rm -rf "$ctl"' EXIT
    vm_write_ctl "$ctl" "$ip" "$peer_ip" "$role" "$@"
    vm_run_qemu "$ctl" "$ip" "$netdev"
  )
}

vm_write_ctl() {
  local ctl=$1 ip=$2 peer_ip=$3 role=$4
  shift 4
  cp "$softroce_dir/lib/guest-main.sh" "$ctl/guest-main.sh"
  cp "$passenv_file" "$ctl/passenv"
  printf '%q ' "$@" >"$ctl/cmd"
  {
    printf 'SHARES=%q\nCWD=%q\nIP=%q\nMTU=%q\n' "${shares[*]}" "$PWD" "$ip" "$mtu"
    printf 'PEER_IP=%q\nROLE=%q\n' "$peer_ip" "$role"
  } >"$ctl/env"
}

vm_run_qemu() {
  local ctl=$1 ip=$2 netdev=$3
  local p9="security_model=none,multidevs=remap" mac i
  mac=52:54:00:00:00:$(printf %02x "${ip##*.}")
  # Nehalem (x86-64-v2, no AVX): with AVX, glibc's string functions run several times
  # slower under TCG, and every process start pays for it. A 256 MiB translation cache
  # halves qemu's memory at no measurable cost.
  # shellcheck disable=SC2054 # commas belong to qemu's option syntax
  local args=(
    -accel "tcg,thread=multi,tb-size=256" -cpu "${RMSG_SOFTROCE_CPU:-Nehalem}"
    -m "$mem" -smp "$smp"
    -machine q35 -nodefaults -no-user-config -display none -monitor none -no-reboot
    -kernel "$kernel" -initrd "$initrd"
    -append "console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off"
    -chardev "file,id=con,path=$ctl/console.log" -serial chardev:con
    -device virtio-serial-pci,id=vser
    -chardev "file,id=out,path=$ctl/out.fifo"
    -device virtserialport,bus=vser.0,chardev=out,name=softroce.out
    -chardev "file,id=err,path=$ctl/err.fifo"
    -device virtserialport,bus=vser.0,chardev=err,name=softroce.err
    -netdev "$netdev" -device "virtio-net-pci,netdev=n0,mac=$mac"
    -fsdev "local,id=fsroot,path=/,readonly=on,$p9"
    -device virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot
    -fsdev "local,id=fsctl,path=$ctl,$p9" -device virtio-9p-pci,fsdev=fsctl,mount_tag=ctl
  )
  for i in "${!shares[@]}"; do
    args+=(-fsdev "local,id=fs$i,path=${shares[$i]},$p9"
      -device "virtio-9p-pci,fsdev=fs$i,mount_tag=share$i")
  done

  # Guest stdout/stderr: virtio-serial -> fifo -> cat -> our stdout/stderr.
  mkfifo "$ctl/out.fifo" "$ctl/err.fifo"
  cat "$ctl/out.fifo" &
  local cat_out=$!
  cat "$ctl/err.fifo" >&2 &
  local cat_err=$!
  local t0=$SECONDS qrc=0
  # --foreground keeps qemu in our process group: Ctrl-C and CTest's kill reach it.
  timeout --foreground -k 5 "$timeout" qemu-system-x86_64 "${args[@]}" </dev/null \
    2>"$ctl/qemu.err" || qrc=$?
  # A qemu that died before opening the fifos leaves the readers blocked in open().
  for f in out err; do
    exec {fd}<>"$ctl/$f.fifo"
    exec {fd}>&-
  done
  wait "$cat_out" "$cat_err" || true
  vm_report "$ctl" "$qrc" $((SECONDS - t0))
}

# The guest's uptime when it reached a stage ("-": never).
vm_stamp() { cat "$1/t_$2" 2>/dev/null || echo -; }

# Turns what the guest left in the control folder into our exit status.
vm_report() {
  local ctl=$1 qrc=$2 wall=$3 rc=125
  if [ "$verbose" = 1 ]; then
    echo "softroce: wall ${wall}s; guest uptime at userland $(vm_stamp "$ctl" userland)s," \
      "rdma ready $(vm_stamp "$ctl" ready)s, command done $(vm_stamp "$ctl" "done")s" >&2
  fi
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    echo "softroce: TIMEOUT: the guest ran past ${timeout}s and was killed" >&2
    rc=124
  elif [ -f "$ctl/rc" ]; then
    rc=$(cat "$ctl/rc")
  else
    echo "softroce: the guest reported no exit status (qemu exit status $qrc)" >&2
    cat "$ctl/qemu.err" >&2
  fi
  if [ "$rc" != 0 ]; then
    local stage="qemu starting"
    [ -s "$ctl/console.log" ] && stage="the kernel booting"
    [ -f "$ctl/t_userland" ] && stage="setting up eth0 and rxe0"
    [ -f "$ctl/t_ready" ] && stage="the command running"
    [ -f "$ctl/t_done" ] && stage="the command finished"
    echo "softroce: the guest got as far as: $stage; its console's tail:" >&2
    tail -n 25 "$ctl/console.log" | sed 's/^/  | /' >&2
  fi
  return "$rc"
}
