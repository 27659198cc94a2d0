// Alive<T>: tokens of a deferred task and of dispatch frames, nested through loop runs,
// and an object destroyed inside the callback its own frame runs.
#include "loop/alive.h"

#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "kit/loop_fixture.h"

namespace rmsg {
namespace {

using testing::LoopTest;

// An object whose dispatch() calls out and then goes on using itself only if it is still
// there: the pattern of TcpStream::dispatch and RdmaStream::notify_pass.
struct Dispatcher {
  explicit Dispatcher(EventLoop& loop) : alive(loop, this) {}
  bool dispatch() {
    const auto frame = alive.token();
    const auto cb = callback;  // the callback may destroy this object, and so itself
    if (cb) cb();
    if (!frame.alive()) return false;
    ++completed;
    return true;
  }
  std::function<void()> callback;
  int completed = 0;
  Alive<Dispatcher> alive;
};

TEST(AliveToken, FitsInsideAStdFunction) {
  // libstdc++ stores a callable inline only when it is trivially copyable and at most two
  // pointers wide: a task holding a token must cost no allocation.
  using Token = Alive<Dispatcher>::Token;
  static_assert(std::is_trivially_copyable_v<Token>);
  static_assert(sizeof(Token) <= 2 * sizeof(void*));
  EXPECT_FALSE(Token().alive());
  EXPECT_EQ(Token().get(), nullptr);
}

TEST_F(LoopTest, ADeferredTaskFindsItsObjectOnlyWhileItLives) {
  auto kept = std::make_unique<Dispatcher>(loop());
  auto gone = std::make_unique<Dispatcher>(loop());
  Dispatcher* found_kept = nullptr;
  int gone_runs = 0;
  loop().defer([t = kept->alive.token(), &found_kept] { found_kept = t.get(); });
  loop().defer([t = gone->alive.token(), &gone_runs] {
    if (t.get() != nullptr) ++gone_runs;
  });
  gone.reset();
  static_cast<void>(loop().run_once(Duration::zero()));
  EXPECT_EQ(found_kept, kept.get());
  EXPECT_EQ(gone_runs, 0);
}

TEST_F(LoopTest, EndKillsTokensTakenBeforeAndAfter) {
  Dispatcher d(loop());
  const auto before = d.alive.token();
  EXPECT_EQ(before.get(), &d);
  d.alive.end();
  d.alive.end();  // idempotent
  EXPECT_TRUE(d.alive.ended());
  EXPECT_FALSE(before.alive());
  EXPECT_FALSE(d.alive.token().alive());
}

TEST_F(LoopTest, AReusedSlotDoesNotReviveAnOldToken) {
  auto first = std::make_unique<Dispatcher>(loop());
  const auto old = first->alive.token();
  first.reset();
  const auto table = AliveTable::of(loop());
  const std::size_t live = table->live();
  Dispatcher second(loop());
  EXPECT_EQ(table->live(), live) << "made, the object has no slot yet";
  const auto fresh = second.alive.token();  // takes the slot the first one freed
  EXPECT_EQ(table->live(), live + 1);
  EXPECT_FALSE(old.alive());
  EXPECT_EQ(old.get(), nullptr);
  EXPECT_EQ(fresh.get(), &second);
}

TEST_F(LoopTest, DestroyedInsideItsOwnCallbackTheFrameLearnsIt) {
  auto d = std::make_unique<Dispatcher>(loop());
  d->callback = [&d] { d.reset(); };
  EXPECT_FALSE(d->dispatch());
  EXPECT_EQ(d, nullptr);
}

// The outer frame's callback runs the loop; in that nested run the same object is
// dispatched again (its frame ends normally), then destroyed, and another object takes
// its slot. The outer frame must still learn that its object is gone; a single
// "destroyed" flag owned by the object would have been set and cleared by the nested frame.
TEST_F(LoopTest, NestedFramesEachKeepTheirOwnAnswer) {
  auto d = std::make_unique<Dispatcher>(loop());
  std::unique_ptr<Dispatcher> successor;
  Alive<Dispatcher>::Token successor_token;
  bool inner_result = false;
  int depth = 0;
  d->callback = [&] {
    if (++depth > 1) return;  // the nested dispatch: returns normally
    loop().defer([&] {
      inner_result = d->dispatch();  // nested frame over the same object
      d.reset();
      successor = std::make_unique<Dispatcher>(loop());
      successor_token = successor->alive.token();  // takes the slot d freed
    });
    static_cast<void>(loop().run_once(Duration::zero()));  // a callback that runs the loop
  };
  EXPECT_FALSE(d->dispatch());
  EXPECT_TRUE(inner_result);
  ASSERT_NE(successor, nullptr);
  EXPECT_EQ(successor_token.get(), successor.get());
}

TEST_F(LoopTest, AnOuterFrameSurvivesANestedFrameThatDestroysNothing) {
  Dispatcher d(loop());
  int depth = 0;
  d.callback = [&] {
    if (++depth == 1) {
      loop().defer([&] { EXPECT_TRUE(d.dispatch()); });
      static_cast<void>(loop().run_once(Duration::zero()));
    }
  };
  EXPECT_TRUE(d.dispatch());
  EXPECT_EQ(d.completed, 2);
}

TEST_F(LoopTest, SlotsAreReturnedAndChunksNeverMove) {
  const auto table = AliveTable::of(loop());
  const std::size_t live = table->live();
  std::vector<std::unique_ptr<Dispatcher>> many;
  std::vector<Alive<Dispatcher>::Token> tokens;
  for (int i = 0; i < 300; ++i) {  // several chunks: earlier tokens must stay valid
    many.push_back(std::make_unique<Dispatcher>(loop()));
    tokens.push_back(many.back()->alive.token());
  }
  EXPECT_EQ(table->live(), live + 300);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(tokens[i].get(), many[i].get());
  many.clear();
  EXPECT_EQ(table->live(), live);
  for (const auto& t : tokens) EXPECT_FALSE(t.alive());
}

// An object destroyed after its loop still frees its slot: the table outlives the loop.
TEST(AliveAfterLoop, AnObjectMayOutliveItsLoop) {
  auto created = EventLoop::create();
  ASSERT_TRUE(created.ok());
  auto loop = std::move(created).value();
  auto d = std::make_unique<Dispatcher>(*loop);
  EXPECT_TRUE(d->dispatch());  // takes its slot
  loop.reset();
  d.reset();
}

// Made on one thread for a loop another thread runs (a relayed connection's stream): the
// slot is taken on the loop thread, by the first token.
TEST(AliveAcrossThreads, MadeElsewhereTheObjectTakesItsSlotOnItsLoop) {
  auto created = EventLoop::create();
  ASSERT_TRUE(created.ok());
  auto loop = std::move(created).value();
  std::unique_ptr<Dispatcher> d;
  std::thread maker([&] { d = std::make_unique<Dispatcher>(*loop); });
  maker.join();
  EXPECT_EQ(AliveTable::of(*loop)->live(), 0u);
  EXPECT_TRUE(d->dispatch());
  EXPECT_EQ(AliveTable::of(*loop)->live(), 1u);
  d.reset();
  EXPECT_EQ(AliveTable::of(*loop)->live(), 0u);
}

}  // namespace
}  // namespace rmsg
