#!/bin/bash
# RPC reaches the messenger only through its port (src/msg/messenger_port.h): nothing in
# src/rpc names the messenger's front, its shards or their fields, or includes their headers.
#   rpc_port_check.sh SOURCE_DIR
set -euo pipefail
pattern='msg/(messenger_impl|messenger_front|services|seams)\.h|Messenger::(Impl|Front)|MessengerAccess|dispatch_rx_|\.impl\b|->impl\b|shards_\[[^]]*\]\.'
if grep -rnE "$pattern" "$1/src/rpc"; then
  echo "rpc_port_check: src/rpc reaches past msg/messenger_port.h (lines above)"
  exit 1
fi
