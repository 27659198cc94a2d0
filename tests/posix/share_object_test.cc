// dup() racing close() of the same number (posix/share_object.h): the close runs in the
// window between reading the slot and taking the reference, on the real descriptor table.
#include "posix/share_object.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace rmsg::posix {
namespace {

class ShareObject : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(table.ensure()); }

  // What close() does to a number: forget it, then drop its reference.
  void close_number(int fd) {
    if (SocketObject* o = table.detach(fd)) give_back(o);
  }
  void give_back(SocketObject* o) {
    if (FdTable::release(o)) {
      ++freed;
      FdTable::free_object(o);
    }
  }
  SocketObject* share(int fd, auto between) {
    return share_object(table, *table.slot(fd), between, [this](SocketObject* o) { give_back(o); });
  }

  FdTable table;
  int freed = 0;
  const int pid = static_cast<int>(getpid());
};

TEST_F(ShareObject, ALiveSourceGivesOneMoreReference) {
  SocketObject* a = table.allocate(SocketState::connected, pid);
  ASSERT_NE(a, nullptr);
  table.attach(3, a);
  EXPECT_EQ(share(3, [] {}), a);
  EXPECT_EQ(a->refs.load(), 2);
}

TEST_F(ShareObject, ASourceClosedInTheWindowGivesNothingAndFreesNothingTwice) {
  SocketObject* a = table.allocate(SocketState::connected, pid);
  ASSERT_NE(a, nullptr);
  table.attach(3, a);
  SocketObject* got = share(3, [&] { close_number(3); });
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(freed, 1);
  // A free object keeps refs 0: the next socket starts from exactly one reference.
  EXPECT_EQ(a->refs.load(), 0);
  EXPECT_EQ(a->state.load(), SocketState::free);
}

TEST_F(ShareObject, AnObjectReusedByAnotherSocketInTheWindowKeepsItsCount) {
  SocketObject* a = table.allocate(SocketState::connected, pid);
  ASSERT_NE(a, nullptr);
  table.attach(3, a);
  SocketObject* b = nullptr;
  SocketObject* got = share(3, [&] {
    close_number(3);
    // The freed place is handed to the next socket, at another number.
    for (int i = 0; i < table.size() && b != a; ++i) {
      b = table.allocate(SocketState::connected, pid);
      if (b != a) give_back(b);
    }
    table.attach(7, b);
  });
  ASSERT_EQ(b, a) << "the freed object's place was not reused";
  EXPECT_EQ(got, nullptr) << "the duplicate of a closed number refers to another socket";
  // Socket b has one number and one reference: its close at 7 must report and free it.
  EXPECT_EQ(b->refs.load(), 1);
  int before = freed;
  close_number(7);
  EXPECT_EQ(freed, before + 1);
}

}  // namespace
}  // namespace rmsg::posix
