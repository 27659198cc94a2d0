// The admin endpoint of a running messenger, read over its Unix socket while the loop runs:
// the values it answers against what the test did, the Prometheus rendering, concurrent
// and malformed clients, and the checks of the socket's path and mode.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rmsg/admin.h"
#include "rmsg/event_loop.h"
#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
constexpr NodeId kA = 1;
constexpr NodeId kB = 2;
constexpr int kMessages = 20;

// The unsigned number after `key` (searched from `from`); -1 when absent.
long long number_after(const std::string& text, const std::string& key, std::size_t from = 0) {
  const auto at = text.find(key, from);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class AdminEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rmsg-admin-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/admin.sock";
    loop_ = EventLoop::create().value();
    MessengerOptions oa;
    oa.node_id = kA;
    a_ = Messenger::create(*loop_, oa, [](NodeId, std::span<const std::byte>) {}).value();
    MessengerOptions ob;
    ob.node_id = kB;
    b_ = Messenger::create(*loop_, ob, [this](NodeId, std::span<const std::byte>) {
           ++received_;
         }).value();
    ConnectionParams params;
    params.transport = Transport::tcp;
    auto address = b_->listen(SocketAddress::parse("127.0.0.1:0").value(), params);
    ASSERT_TRUE(address.ok());
    params.peer = SocketAddress::parse(*address).value();
    ASSERT_TRUE(a_->add_peer(kB, params).ok());
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_TRUE(a_->send(kB, std::vector<std::byte>(16, std::byte{7})).ok());
    }
    ASSERT_TRUE(loop_->run_for([&] { return received_ == kMessages; }, 10s));
  }
  void TearDown() override {
    endpoint_.reset();
    a_.reset();
    b_.reset();
    ::rmdir(dir_.c_str());
  }

  // admin_request on another thread while this one runs the messengers' loop.
  std::string ask(const std::string& request) {
    std::atomic<bool> done{false};
    Result<std::string> answer = Errc::timeout;
    std::thread client([&] {
      answer = admin_request(path_, request, 10s);
      done = true;
      loop_->post([] {});  // wakes the loop to see it
    });
    EXPECT_TRUE(loop_->run_for([&] { return done.load(); }, 15s));
    client.join();
    EXPECT_TRUE(answer.ok()) << answer.error().message();
    return answer.ok() ? *answer : std::string();
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Messenger> a_;
  std::unique_ptr<Messenger> b_;
  std::unique_ptr<AdminEndpoint> endpoint_;
  int received_ = 0;
};

TEST_F(AdminEndpointTest, JsonShowsTheCountersAndTheSessionTheTestMade) {
  endpoint_ = AdminEndpoint::start(*a_, path_).value();
  const std::string json = ask("json");
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.back(), '\n');
  EXPECT_EQ(occurrences(json, "\n"), 1u) << json;
  EXPECT_EQ(json.rfind("{\"node\":1,\"loops\":1,\"counters\":{", 0), 0u) << json;
  // One session, with B, connected over TCP, nothing left queued once B has everything.
  EXPECT_EQ(occurrences(json, "\"peer\":"), 1u) << json;
  const auto session = json.find(
      "\"sessions\":[{\"peer\":2,\"loop\":0,\"connected\":true,"
      "\"transport\":\"tcp\",");
  ASSERT_NE(session, std::string::npos) << json;
  EXPECT_GE(number_after(json, "\"connect_seq\":", session), 1);
  EXPECT_NE(json.find("\"authenticated\":false}]}"), std::string::npos) << json;
  // The sums and loop 0's set agree, and count at least the messages sent.
  const auto sent = number_after(json, "\"msg.sent\":");
  EXPECT_GE(sent, kMessages);
  EXPECT_LE(sent, static_cast<long long>(a_->counter_total("msg.sent")));
  EXPECT_EQ(number_after(json, "\"msg.sent\":", json.find("\"loop_counters\":[")), sent);
  EXPECT_EQ(number_after(json, "\"msg.sessions\":"), 1);
}

TEST_F(AdminEndpointTest, PrometheusHasTypeLinesAndTheSameValues) {
  endpoint_ = AdminEndpoint::start(*a_, path_).value();
  const std::string json = ask("json");
  const std::string prom = ask("prometheus");
  EXPECT_NE(prom.find("# TYPE rmsg_msg_sent untyped\nrmsg_msg_sent{loop=\"0\"} "),
            std::string::npos)
      << prom;
  EXPECT_EQ(number_after(prom, "rmsg_msg_sent{loop=\"0\"} "), number_after(json, "\"msg.sent\":"));
  EXPECT_EQ(number_after(prom, "rmsg_msg_sessions{loop=\"0\"} "), 1);
  EXPECT_NE(prom.find("# TYPE rmsg_session_connected gauge\n"
                      "rmsg_session_connected{peer=\"2\",loop=\"0\"} 1\n"),
            std::string::npos)
      << prom;
  // Every sample's family has its # TYPE line, and no name keeps a dot.
  EXPECT_EQ(prom.find("rmsg_msg."), std::string::npos);
  EXPECT_GT(occurrences(prom, "# TYPE "), 4u);
}

TEST_F(AdminEndpointTest, ASecondClientIsServedWhileOneIsConnected) {
  endpoint_ = AdminEndpoint::start(*a_, path_).value();
  const int idle = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(idle, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
  ASSERT_EQ(::connect(idle, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_TRUE(::write(idle, "js", 2) == 2);  // half a request, then nothing
  EXPECT_NE(ask("json").find("\"transport\":\"tcp\""), std::string::npos);
  ::close(idle);
}

TEST_F(AdminEndpointTest, MalformedRequestsGetAnErrorLine) {
  endpoint_ = AdminEndpoint::start(*a_, path_).value();
  EXPECT_EQ(ask("perf dump"), "{\"error\":\"unknown request (send json or prometheus)\"}\n");
  EXPECT_EQ(ask(std::string(200, 'x')), "{\"error\":\"request line too long\"}\n");
  EXPECT_EQ(ask("").rfind("{\"error\":", 0), 0u);
  // The endpoint still answers.
  EXPECT_EQ(ask("json").rfind("{\"node\":1,", 0), 0u);
}

TEST_F(AdminEndpointTest, TheSocketIsPrivateAndUnsafePathsAreRefused) {
  endpoint_ = AdminEndpoint::start(*a_, path_).value();
  struct stat st {};
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A live endpoint's path is refused; removed with its endpoint.
  EXPECT_EQ(AdminEndpoint::start(*a_, path_).error(), errno_code(EADDRINUSE));
  endpoint_.reset();
  EXPECT_NE(::lstat(path_.c_str(), &st), 0);
  // Not a socket: refused, left alone.
  const std::string file = dir_ + "/file";
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(AdminEndpoint::start(*a_, file).error(), errno_code(EEXIST));
  ::unlink(file.c_str());
  // A directory others may write.
  const std::string open_dir = dir_ + "/open";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  EXPECT_EQ(AdminEndpoint::start(*a_, open_dir + "/admin.sock").error(), errno_code(EACCES));
  ::rmdir(open_dir.c_str());
  EXPECT_TRUE(AdminEndpoint::start(*a_, "").error() == make_error_code(Errc::invalid_argument));
}

}  // namespace
}  // namespace rmsg

namespace rmsg {
namespace {

// Over two loops on their own threads: one snapshot per loop, each taken on its loop and
// gathered on loop 0; the client is this (foreign) thread.
TEST(AdminEndpointLoops, EachLoopAnswersItsOwnSessionsAndCounters) {
  char tmpl[] = "/tmp/rmsg-admin-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/admin.sock";
  auto a_loops = LoopThreads::create(2).value();
  auto p_loops = LoopThreads::create(1).value();
  MessengerOptions oa;
  oa.node_id = kA;
  auto a =
      Messenger::create(a_loops->loops(), oa, [](NodeId, std::span<const std::byte>) {}).value();
  // Two peers whose sessions on A live on different loops.
  std::vector<NodeId> peers;
  for (NodeId id = 2; id < 64 && peers.size() < 2; ++id) {
    if (peers.empty() || &a->loop_of(id) != &a->loop_of(peers[0])) peers.push_back(id);
  }
  ASSERT_EQ(peers.size(), 2u);
  std::mutex mu;
  std::condition_variable cv;
  int received = 0;
  std::vector<std::unique_ptr<Messenger>> others;
  ConnectionParams params;
  params.transport = Transport::tcp;
  for (NodeId id : peers) {
    MessengerOptions o;
    o.node_id = id;
    others.push_back(
        Messenger::create(p_loops->loop(0), o, [&](NodeId, std::span<const std::byte>) {
          std::lock_guard lock(mu);
          ++received;
          cv.notify_all();
        }).value());
    auto address = others.back()->listen(SocketAddress::parse("127.0.0.1:0").value(), params);
    ASSERT_TRUE(address.ok());
    ConnectionParams to = params;
    to.peer = SocketAddress::parse(*address).value();
    ASSERT_TRUE(a->add_peer(id, to).ok());
  }
  auto endpoint = AdminEndpoint::start(*a, path).value();
  a_loops->start();
  p_loops->start();
  for (int i = 0; i < kMessages; ++i) {
    for (NodeId id : peers) ASSERT_TRUE(a->send(id, std::vector<std::byte>(8)).ok());
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return received == 2 * kMessages; }));
  }
  auto answer = admin_request(path, "json", 10s);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  const std::string& json = *answer;
  EXPECT_EQ(json.rfind("{\"node\":1,\"loops\":2,", 0), 0u) << json;
  EXPECT_EQ(occurrences(json, "\"peer\":"), 2u) << json;
  EXPECT_EQ(occurrences(json, "\"transport\":\"tcp\""), 2u) << json;
  for (NodeId id : peers) {
    const auto at = json.find("{\"peer\":" + std::to_string(id) + ",\"loop\":");
    ASSERT_NE(at, std::string::npos) << json;
    const std::size_t loop = &a->loop_of(id) == &a_loops->loop(0) ? 0 : 1;
    EXPECT_EQ(number_after(json, "\"loop\":", at), static_cast<long long>(loop)) << json;
  }
  // Each loop sent its peer's messages; the sum is both.
  const auto per_loop = json.find("\"loop_counters\":[");
  const auto second = json.find("},{", per_loop);
  ASSERT_NE(second, std::string::npos);
  EXPECT_EQ(number_after(json, "\"msg.sent\":"), 2 * kMessages);
  EXPECT_EQ(number_after(json, "\"msg.sent\":", per_loop), kMessages);
  EXPECT_EQ(number_after(json, "\"msg.sent\":", second), kMessages);
  a_loops->run_sync(0, [&] { endpoint.reset(); });
  a.reset();
  others.clear();
  a_loops->stop();
  p_loops->stop();
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace rmsg
