#include "admin/admin_render.h"

#include <set>

#include "rmsg/connection_manager.h"

namespace rmsg::admin {
namespace {

// Counter names and error texts are ours, but escape what JSON needs anyway.
void append_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_counters(std::string& out, const std::map<std::string, std::uint64_t>& counters) {
  out += '{';
  bool first = true;
  for (const auto& [name, value] : counters) {
    if (!first) out += ',';
    first = false;
    append_string(out, name);
    out += ':';
    out += std::to_string(value);
  }
  out += '}';
}

const char* boolean(bool b) {
  return b ? "true" : "false";
}

}  // namespace

std::string render_json(NodeId node, const std::vector<ShardSnapshot>& shards) {
  std::map<std::string, std::uint64_t> totals;
  for (const auto& sh : shards) {
    for (const auto& [name, value] : sh.counters) totals[name] += value;
  }
  std::string out = "{\"node\":" + std::to_string(node) +
                    ",\"loops\":" + std::to_string(shards.size()) + ",\"counters\":";
  append_counters(out, totals);
  out += ",\"loop_counters\":[";
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (i > 0) out += ',';
    append_counters(out, shards[i].counters);
  }
  out += "],\"sessions\":[";
  bool first = true;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    for (const auto& [peer, s] : shards[i].sessions) {
      if (!first) out += ',';
      first = false;
      out += "{\"peer\":" + std::to_string(peer) + ",\"loop\":" + std::to_string(i) +
             ",\"connected\":" + boolean(s.connected) + ",\"transport\":";
      out += s.transport ? std::string("\"") + to_string(*s.transport) + "\"" : "null";
      out += ",\"queued\":" + std::to_string(s.queued) +
             ",\"in_flight\":" + std::to_string(s.in_flight) +
             ",\"delivered\":" + std::to_string(s.delivered) +
             ",\"connect_seq\":" + std::to_string(s.connect_seq) +
             ",\"authenticated\":" + boolean(s.authenticated) + '}';
    }
  }
  out += "]}\n";
  return out;
}

std::string prometheus_name(const std::string& name) {
  std::string out = "rmsg_";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

std::string render_prometheus(const std::vector<ShardSnapshot>& shards) {
  // Untyped: a CounterSet holds counters and gauges alike (Counter::set).
  std::set<std::string> names;
  for (const auto& sh : shards) {
    for (const auto& [name, value] : sh.counters) names.insert(name);
  }
  std::string out;
  for (const auto& name : names) {
    const std::string metric = prometheus_name(name);
    out += "# TYPE " + metric + " untyped\n";
    for (std::size_t i = 0; i < shards.size(); ++i) {
      auto it = shards[i].counters.find(name);
      const std::uint64_t v = it == shards[i].counters.end() ? 0 : it->second;
      out += metric + "{loop=\"" + std::to_string(i) + "\"} " + std::to_string(v) + '\n';
    }
  }
  struct Gauge {
    const char* name;
    std::uint64_t (*get)(const Messenger::SessionInfo&);
  };
  static constexpr Gauge kGauges[] = {
      {"rmsg_session_connected",
       [](const Messenger::SessionInfo& s) -> std::uint64_t { return s.connected; }},
      {"rmsg_session_queued",
       [](const Messenger::SessionInfo& s) -> std::uint64_t { return s.queued; }},
      {"rmsg_session_in_flight",
       [](const Messenger::SessionInfo& s) -> std::uint64_t { return s.in_flight; }},
      {"rmsg_session_connect_seq",
       [](const Messenger::SessionInfo& s) -> std::uint64_t { return s.connect_seq; }},
  };
  for (const Gauge& g : kGauges) {
    out += std::string("# TYPE ") + g.name + " gauge\n";
    for (std::size_t i = 0; i < shards.size(); ++i) {
      for (const auto& [peer, s] : shards[i].sessions) {
        out += std::string(g.name) + "{peer=\"" + std::to_string(peer) + "\",loop=\"" +
               std::to_string(i) + "\"} " + std::to_string(g.get(s)) + '\n';
      }
    }
  }
  return out;
}

std::string render_error(const std::string& what) {
  std::string out = "{\"error\":";
  append_string(out, what);
  out += "}\n";
  return out;
}

}  // namespace rmsg::admin
