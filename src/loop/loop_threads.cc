// LoopThreads: the loops and the threads the application asked for.
#include "rmsg/loop_threads.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <utility>

#include "loop/loop_thread.h"
#include "rmsg/log.h"

namespace rmsg {
namespace {

// A CPU this machine has (configured, online or not).
bool known_cpu(int cpu) {
  return cpu >= 0 && cpu < CPU_SETSIZE && cpu < sysconf(_SC_NPROCESSORS_CONF);
}

}  // namespace

// The kernel refuses (EINVAL) a CPU that is offline or outside the process's cpuset.
Result<void> pin_this_thread(int cpu) {
  if (!known_cpu(cpu)) return make_error_code(Errc::invalid_argument);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc == EINVAL) return make_error_code(Errc::invalid_argument);
  if (rc != 0) return errno_code(rc);
  return {};
}

Result<std::unique_ptr<LoopThreads>> LoopThreads::create(std::size_t n,
                                                         const EventLoopOptions& options,
                                                         std::span<const int> cpus) {
  if (n == 0) return make_error_code(Errc::invalid_argument);
  for (const int cpu : cpus) {
    if (!known_cpu(cpu)) return make_error_code(Errc::invalid_argument);
  }
  std::unique_ptr<LoopThreads> t(new LoopThreads());
  for (std::size_t i = 0; i < n; ++i) {
    t->cpus_.push_back(cpus.empty() ? -1 : cpus[i % cpus.size()]);
    EventLoopOptions o = options;
    if (o.seed) o.seed = *o.seed + i;
    auto l = EventLoop::create(o);
    if (!l) return l.error();
    t->raw_.push_back(l.value().get());
    t->loops_.push_back(std::move(l).value());
  }
  return t;
}

LoopThreads::~LoopThreads() {
  stop();
}

void LoopThreads::start() {
  if (started_) return;
  started_ = true;
  for (std::size_t i = 0; i < raw_.size(); ++i) {
    threads_.emplace_back([l = raw_[i], cpu = cpus_[i]] {
      // create() checked that the machine has the CPU; the process may still be kept off
      // it (a cpuset): then the thread runs unpinned, and says so.
      if (cpu >= 0) {
        if (auto r = pin_this_thread(cpu); !r) {
          RMSG_LOG(warn, "loop thread: not pinned to CPU %d: %s", cpu, r.error().message().c_str());
        }
      }
      if (auto r = l->run(); !r) RMSG_LOG(warn, "loop thread: %s", r.error().message().c_str());
    });
  }
  // Until a loop has run on its thread, every thread passes for its own
  // (EventLoop::in_loop_thread), and a messenger would call straight into it from anywhere.
  for (std::size_t i = 0; i < raw_.size(); ++i) run_sync(i, [] {});
}

void LoopThreads::stop() {
  for (EventLoop* l : raw_) l->stop();
  for (auto& t : threads_) t.join();
  if (!threads_.empty()) {
    for (EventLoop* l : raw_) loop::Access::mark_orphaned(*l);
  }
  threads_.clear();
  started_ = false;
}

void LoopThreads::run_sync(std::size_t i, const std::function<void()>& f) {
  if (!started_) return f();
  std::promise<void> done;
  auto fut = done.get_future();
  raw_[i]->post([&f, &done] {
    f();
    done.set_value();
  });
  fut.wait();
}

}  // namespace rmsg
