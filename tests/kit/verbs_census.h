// The kernel's view of this process's verbs objects: `rdma -j res show qp|cq|mr` filtered
// by our pid, for tests that check what the connection manager created or freed.
#pragma once

#include <string>
#include <vector>

namespace rmsg::testing {

struct Census {
  int qp = -1;
  int cq = -1;
  int mr = -1;
  bool ok() const { return qp >= 0 && cq >= 0 && mr >= 0; }
  std::string to_string() const;
  friend bool operator==(const Census&, const Census&) = default;
};

// How many objects of `kind` (qp, cq, mr, pd, cm_id) `rdma res show` lists for this
// process, or -1 (with `why`) when the tool cannot be run or its output not read.
int verbs_objects(const char* kind, std::string* why = nullptr);

// The counts of several kinds from one `rdma -j -b -` run (a process start costs 0.5 s
// and more in the guest): one entry per kind, each -1 (with `why`) when it cannot be read.
std::vector<int> verbs_objects_of(const std::vector<std::string>& kinds,
                                  std::string* why = nullptr);

// -1 fields (and `why`) when the tool cannot be run or read.
Census take_census(std::string* why = nullptr);

}  // namespace rmsg::testing
