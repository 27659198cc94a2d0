// What the admin endpoint answers: one snapshot per messenger loop, and its renderings as
// JSON and as Prometheus text (include/rmsg/admin.h; docs/operations.md names each field).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rmsg/messenger.h"

namespace rmsg::admin {

// One loop's part, taken on that loop.
struct ShardSnapshot {
  std::map<std::string, std::uint64_t> counters;
  std::vector<std::pair<NodeId, Messenger::SessionInfo>> sessions;
};

// One line: {"node":N,"loops":L,"counters":{...sums...},"loop_counters":[{...},...],
// "sessions":[{...},...]} and a newline.
std::string render_json(NodeId node, const std::vector<ShardSnapshot>& shards);
// "# TYPE rmsg_<name> untyped" and one sample per loop (label loop="i") for each counter,
// then per-session gauges (labels peer, loop).
std::string render_prometheus(const std::vector<ShardSnapshot>& shards);
// rmsg_ and the name with every character outside [A-Za-z0-9_] turned into '_'.
std::string prometheus_name(const std::string& name);
// {"error":"<what>"} and a newline.
std::string render_error(const std::string& what);

}  // namespace rmsg::admin
