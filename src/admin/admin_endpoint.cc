// AdminEndpoint (include/rmsg/admin.h): the listener and its clients on loop 0, and the
// gathering of one snapshot per loop for each request.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "admin/admin_render.h"
#include "admin/admin_socket.h"
#include "msg/messenger_port.h"
#include "rmsg/admin.h"

namespace rmsg {

class AdminEndpoint::Impl : public std::enable_shared_from_this<AdminEndpoint::Impl> {
 public:
  // A request line longer than this is refused (the valid ones are a word).
  static constexpr std::size_t kMaxLine = 64;
  static constexpr std::size_t kMaxClients = 16;

  Impl(Messenger& m, std::string path) : m_(m), path_(std::move(path)) {}

  Result<void> start() {
    auto fd = admin::listen_unix(path_);
    if (!fd) return fd.error();
    listen_fd_ = *fd;
    std::weak_ptr<Impl> weak = weak_from_this();
    auto w = m_.loop().watch(listen_fd_, kReadable, [weak](std::uint32_t) {
      if (auto self = weak.lock()) self->accept_all();
    });
    if (!w) return w.error();
    listen_watch_ = *w;
    return {};
  }

  // The endpoint's destructor: everything that touches fds and the loop happens here,
  // on loop 0; a snapshot task still under way keeps only this object's memory alive.
  void stop() {
    for (auto& [id, c] : clients_) {
      m_.loop().unwatch(c.watch);
      ::close(c.fd);
    }
    clients_.clear();
    if (listen_fd_ >= 0) {
      m_.loop().unwatch(listen_watch_);
      ::close(listen_fd_);
      ::unlink(path_.c_str());
      listen_fd_ = -1;
    }
    stopped_ = true;
  }

  const std::string& path() const noexcept { return path_; }

 private:
  struct Client {
    int fd = -1;
    WatchId watch = 0;
    std::string in;
    std::string out;
    std::size_t written = 0;
    bool answering = false;  // the line is read; a snapshot or the answer is under way
  };
  struct Gather {
    std::uint64_t client = 0;
    bool prometheus = false;
    std::vector<admin::ShardSnapshot> shards;
    std::size_t left = 0;
  };

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error the next readiness retries
      if (clients_.size() >= kMaxClients) {
        ::close(fd);
        continue;
      }
      const std::uint64_t id = ++next_client_;
      std::weak_ptr<Impl> weak = weak_from_this();
      auto w = m_.loop().watch(fd, kReadable, [weak, id](std::uint32_t events) {
        if (auto self = weak.lock()) self->on_client(id, events);
      });
      if (!w) {
        ::close(fd);
        continue;
      }
      clients_[id] = Client{fd, *w, {}, {}, 0, false};
    }
  }

  void drop(std::uint64_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    // Unread input makes close() reset the connection, and the client would lose the
    // answer (a request line too long): read what is there, a bounded amount.
    char sink[4096];
    for (int i = 0; i < 4 && ::read(it->second.fd, sink, sizeof sink) > 0; ++i) {
    }
    m_.loop().unwatch(it->second.watch);
    ::close(it->second.fd);
    clients_.erase(it);
  }

  void on_client(std::uint64_t id, std::uint32_t events) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    Client& c = it->second;
    if (c.answering) {
      if (!c.out.empty()) write_some(id, c);
      return;
    }
    char buf[kMaxLine + 1];
    const ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (events & kIoError) != 0) {
      drop(id);
      return;
    }
    if (n < 0) return;
    c.in.append(buf, static_cast<std::size_t>(n));
    const auto nl = c.in.find('\n');
    if (nl == std::string::npos) {
      if (c.in.size() > kMaxLine) answer(id, admin::render_error("request line too long"));
      return;
    }
    std::string line = c.in.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    c.answering = true;
    (void)m_.loop().set_interest(c.watch, 0);
    if (line == "json" || line == "prometheus") {
      snapshot(id, line == "prometheus");
    } else {
      answer(id, admin::render_error("unknown request (send json or prometheus)"));
    }
  }

  // One task per loop; each copies its shard's counters and sessions and hands them back
  // to loop 0, where the last one renders the answer.
  void snapshot(std::uint64_t id, bool prometheus) {
    auto g = std::make_shared<Gather>();
    g->client = id;
    g->prometheus = prometheus;
    g->shards.resize(m_.loop_count());
    g->left = m_.loop_count();
    std::weak_ptr<Impl> weak = weak_from_this();
    for (std::size_t i = 0; i < m_.loop_count(); ++i) {
      msg::MessengerPort port(m_, i);
      auto take = [weak, port, g, i] {
        auto self = weak.lock();
        if (!self || self->stopped_) return;
        admin::ShardSnapshot snap{self->m_.counters(i).snapshot(), port.sessions()};
        auto back = [weak, g, i, snap = std::move(snap)]() mutable {
          if (auto s = weak.lock()) s->gathered(g, i, std::move(snap));
        };
        if (i == 0) {
          back();
        } else {
          self->m_.loop().post(std::move(back));
        }
      };
      if (i == 0) {
        take();
      } else {
        port.loop().post(std::move(take));
      }
    }
  }

  void gathered(const std::shared_ptr<Gather>& g, std::size_t i, admin::ShardSnapshot snap) {
    if (stopped_) return;
    g->shards[i] = std::move(snap);
    if (--g->left > 0) return;
    answer(g->client, g->prometheus ? admin::render_prometheus(g->shards)
                                    : admin::render_json(m_.node_id(), g->shards));
  }

  void answer(std::uint64_t id, std::string text) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    Client& c = it->second;
    c.answering = true;
    c.out = std::move(text);
    c.written = 0;
    (void)m_.loop().set_interest(c.watch, kWritable);
    write_some(id, c);
  }

  void write_some(std::uint64_t id, Client& c) {
    while (c.written < c.out.size()) {
      const ssize_t w =
          ::send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) return;  // the watcher brings us back when writable
      if (w <= 0) break;                     // the client went away
      c.written += static_cast<std::size_t>(w);
    }
    drop(id);
  }

  Messenger& m_;
  const std::string path_;
  int listen_fd_ = -1;
  WatchId listen_watch_ = 0;
  std::atomic<bool> stopped_{false};
  std::uint64_t next_client_ = 0;
  std::map<std::uint64_t, Client> clients_;
};

Result<std::unique_ptr<AdminEndpoint>> AdminEndpoint::start(Messenger& messenger,
                                                            const std::string& path) {
  auto impl = std::make_shared<Impl>(messenger, path);
  if (auto r = impl->start(); !r) {
    impl->stop();
    return r.error();
  }
  return std::unique_ptr<AdminEndpoint>(new AdminEndpoint(std::move(impl)));
}

AdminEndpoint::AdminEndpoint(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminEndpoint::~AdminEndpoint() {
  impl_->stop();
}

const std::string& AdminEndpoint::path() const noexcept {
  return impl_->path();
}

}  // namespace rmsg
