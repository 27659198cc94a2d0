#include "report.h"

#include <algorithm>

namespace rmsg::perf {
namespace {

// The value below which `q` of the samples lie (nearest rank).
double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto k =
      std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

Row summarize(const std::string& transport, const Spec& spec, Measurement m) {
  Row r;
  r.test = spec.test;
  r.transport = transport;
  r.size = spec.size;
  r.iters = spec.iters;
  r.median_us = quantile(m.samples_ns, 0.5) / 1e3;
  r.p99_us = quantile(m.samples_ns, 0.99) / 1e3;
  if (m.elapsed_s > 0) {
    r.msgs_per_s = static_cast<double>(spec.iters) / m.elapsed_s;
    r.mb_per_s = r.msgs_per_s * static_cast<double>(spec.size) / 1e6;
  }
  return r;
}

void set_ratio(Row& row, const Row& baseline) {
  row.baseline = baseline.transport;
  if (row.test == Test::lat && baseline.median_us > 0) {
    row.ratio = row.median_us / baseline.median_us;
  } else if (row.test == Test::bw && baseline.mb_per_s > 0) {
    row.ratio = row.mb_per_s / baseline.mb_per_s;
  }
}

void set_round_ratios(Row& row, const std::vector<Row>& rounds,
                      const std::vector<Row>& base_rounds) {
  const std::size_t n = std::min(rounds.size(), base_rounds.size());
  if (n < 2) return;
  for (std::size_t i = 0; i < n; ++i) {
    Row r = rounds[i];
    set_ratio(r, base_rounds[i]);
    if (!r.ratio) return;
    row.ratio_min = std::min(row.ratio_min.value_or(*r.ratio), *r.ratio);
    row.ratio_max = std::max(row.ratio_max.value_or(*r.ratio), *r.ratio);
  }
}

Row median_row(std::vector<Row> rows) {
  auto key = [](const Row& r) { return r.test == Test::lat ? r.median_us : r.mb_per_s; };
  const auto mid = rows.begin() + static_cast<std::ptrdiff_t>(rows.size() / 2);
  std::nth_element(rows.begin(), mid, rows.end(),
                   [&](const Row& a, const Row& b) { return key(a) < key(b); });
  return *mid;
}

void Report::add(const Row& r) {
  if (json_) {
    std::printf(
        "{\"test\":\"%s\",\"transport\":\"%s\",\"size\":%llu,\"iters\":%llu,"
        "\"median_us\":%.3f,\"p99_us\":%.3f,\"mb_per_s\":%.2f,\"msgs_per_s\":%.1f,"
        "\"user_us_per_msg\":%.3f,\"sys_us_per_msg\":%.3f",
        to_string(r.test), r.transport.c_str(), static_cast<unsigned long long>(r.size),
        static_cast<unsigned long long>(r.iters), r.median_us, r.p99_us, r.mb_per_s, r.msgs_per_s,
        r.user_us_per_msg, r.sys_us_per_msg);
    if (r.ratio)
      std::printf(",\"baseline\":\"%s\",\"vs_baseline\":%.3f", r.baseline.c_str(), *r.ratio);
    if (r.ratio_min && r.ratio_max) {
      std::printf(",\"vs_baseline_min\":%.3f,\"vs_baseline_max\":%.3f", *r.ratio_min, *r.ratio_max);
    }
    std::printf("}\n");
    std::fflush(stdout);
    return;
  }
  if (!header_done_) {
    header_done_ = true;
    std::printf("%-4s %-9s %9s %8s %10s %10s %10s %11s %8s %8s  %s\n", "test", "transport", "size",
                "iters", "median_us", "p99_us", "MB/s", "msgs/s", "usr_us", "sys_us",
                "vs baseline");
  }
  char ratio[128] = "";
  if (r.ratio) {
    const int n =
        std::snprintf(ratio, sizeof ratio, "%.2fx %s %s", *r.ratio,
                      r.test == Test::lat ? "latency of" : "bandwidth of", r.baseline.c_str());
    if (r.ratio_min && r.ratio_max && n > 0 && static_cast<std::size_t>(n) < sizeof ratio) {
      std::snprintf(ratio + n, sizeof ratio - static_cast<std::size_t>(n), " (rounds %.2f-%.2f)",
                    *r.ratio_min, *r.ratio_max);
    }
  }
  std::printf("%-4s %-9s %9llu %8llu %10.2f %10.2f %10.1f %11.0f %8.2f %8.2f  %s\n",
              to_string(r.test), r.transport.c_str(), static_cast<unsigned long long>(r.size),
              static_cast<unsigned long long>(r.iters), r.median_us, r.p99_us, r.mb_per_s,
              r.msgs_per_s, r.user_us_per_msg, r.sys_us_per_msg, ratio);
  std::fflush(stdout);
}

}  // namespace rmsg::perf
