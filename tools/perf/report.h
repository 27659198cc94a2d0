// Turning measurements into numbers (Row) and printing them as a table or JSON lines.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "perf.h"

namespace rmsg::perf {

struct Row {
  Test test = Test::lat;
  std::string transport;
  std::uint64_t size = 0;
  std::uint64_t iters = 0;
  double median_us = 0;
  double p99_us = 0;
  double mb_per_s = 0;    // 10^6 bytes per second of payload, one direction
  double msgs_per_s = 0;  // lat: round trips per second; bw: messages per second
  // Process CPU time (getrusage: every thread, so both ends of an in-process run) over
  // the measurement's run, connection setup and warm-up included, per measured message.
  double user_us_per_msg = 0;
  double sys_us_per_msg = 0;
  // Against the baseline measured in the same run: lat, median / baseline median (lower
  // is faster); bw, MB/s / baseline MB/s (higher is faster).
  std::optional<double> ratio;
  std::string baseline;
  // With --repeat: the lowest and highest ratio of one round to the baseline's round beside
  // it (rounds alternate), the spread that the host's drift leaves in the median ratio.
  std::optional<double> ratio_min;
  std::optional<double> ratio_max;
};

Row summarize(const std::string& transport, const Spec& spec, Measurement m);
void set_ratio(Row& row, const Row& baseline);
// Sets ratio_min/ratio_max from rounds[i] against base_rounds[i] (two rounds or more).
void set_round_ratios(Row& row, const std::vector<Row>& rounds,
                      const std::vector<Row>& base_rounds);
// Of several rounds, the one with the median headline number (lat: median latency; bw:
// MB/s).
Row median_row(std::vector<Row> rows);

class Report {
 public:
  explicit Report(bool json) : json_(json) {}
  void add(const Row& row);

 private:
  bool json_;
  bool header_done_ = false;
};

}  // namespace rmsg::perf
