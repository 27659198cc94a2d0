// LoopThreads: the loops and the threads the application asked for.
#include "rmsg/loop_threads.h"

#include <future>
#include <utility>

#include "rmsg/log.h"

namespace rmsg {

Result<std::unique_ptr<LoopThreads>> LoopThreads::create(std::size_t n,
                                                         const EventLoopOptions& options) {
  if (n == 0) return make_error_code(Errc::invalid_argument);
  std::unique_ptr<LoopThreads> t(new LoopThreads());
  for (std::size_t i = 0; i < n; ++i) {
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
  for (EventLoop* l : raw_) {
    threads_.emplace_back([l] {
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
