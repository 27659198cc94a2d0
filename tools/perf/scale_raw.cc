#include "scale_raw.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "perf.h"

namespace rmsg::perf {

double raw_verbs_mb_per_s(const std::string& host, std::size_t qps, std::uint64_t total,
                          std::uint64_t size) {
  const RunnerFactory make = find_runner("verbs");
  auto address = SocketAddress::from_host_port(host, 0);
  if (make == nullptr || !address || qps == 0 || size == 0) return -1;
  RunOptions ro;
  ro.host = host;
  auto runner = make(ro);
  std::vector<std::unique_ptr<Server>> servers;
  for (std::size_t i = 0; i < qps; ++i) {
    auto s = runner->start_server(*address);
    if (!s) {
      std::fprintf(stderr, "rmsg-perf: scale: raw verbs server: %s\n", s.error().message().c_str());
      return -1;
    }
    servers.push_back(std::move(s).value());
  }
  Spec spec;
  spec.test = Test::bw;
  spec.size = size;
  spec.iters = std::max<std::uint64_t>(1, total / qps / size);
  std::vector<double> elapsed(qps, -1);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < qps; ++i) {
    clients.emplace_back([&, i] {
      SocketAddress a = *address;
      a.set_port(servers[i]->port());
      Progress progress("raw verbs " + std::to_string(i));
      auto m = runner->run(a, spec, progress);
      if (m) {
        elapsed[i] = m->elapsed_s;
      } else {
        std::fprintf(stderr, "rmsg-perf: scale: raw verbs QP %zu: %s\n", i,
                     m.error().message().c_str());
      }
    });
  }
  for (auto& c : clients) c.join();
  servers.clear();
  if (std::any_of(elapsed.begin(), elapsed.end(), [](double e) { return e <= 0; })) return -1;
  const double longest = *std::max_element(elapsed.begin(), elapsed.end());
  return static_cast<double>(spec.iters * size * qps) / longest / 1e6;
}

}  // namespace rmsg::perf
