// Node ids (rmsg/node_id.h): generated, written and read back, kept in a file.
#include "rmsg/node_id.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

namespace rmsg {
namespace {

TEST(NodeId, GeneratedIdsAreNonzeroAndDistinct) {
  std::set<NodeId> seen;
  for (int i = 0; i < 1000; ++i) {
    auto id = generate_node_id();
    ASSERT_TRUE(id.ok()) << id.error().message();
    EXPECT_NE(*id, 0u);
    seen.insert(*id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(NodeId, StringRoundTrip) {
  for (const NodeId id : {NodeId{1}, NodeId{0xff}, NodeId{0x0123456789abcdef}, ~NodeId{0}}) {
    const std::string s = node_id_to_string(id);
    EXPECT_EQ(s.size(), 16u);
    auto back = parse_node_id(s);
    ASSERT_TRUE(back.ok()) << s;
    EXPECT_EQ(*back, id);
  }
  EXPECT_EQ(node_id_to_string(0xff), "00000000000000ff");
  EXPECT_EQ(parse_node_id(" 0xFF\n").value(), 0xffu);
  EXPECT_EQ(parse_node_id("7").value(), 7u);
}

TEST(NodeId, ParseRefusesWhatIsNotAnId) {
  for (const char* bad : {"", "0", "0000", "0x", "12345678901234567", "xyz", "12 34", "-1"}) {
    EXPECT_TRUE(parse_node_id(bad).is(Errc::invalid_argument)) << '"' << bad << '"';
  }
}

class NodeIdFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rmsg-node-id-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/node-id";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(NodeIdFile, CreatedOnceThenReadBack) {
  auto first = node_id_file(path_);
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto again = node_id_file(path_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*first, *again);
  std::ifstream in(path_);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, node_id_to_string(*first));
}

TEST_F(NodeIdFile, KeepsAnIdTheApplicationWrote) {
  std::ofstream(path_) << "0x2a\n";
  EXPECT_EQ(node_id_file(path_).value(), 42u);
}

TEST_F(NodeIdFile, GarbageIsAnErrorNotANewId) {
  std::ofstream(path_) << "not an id\n";
  EXPECT_TRUE(node_id_file(path_).is(Errc::invalid_argument));
}

TEST_F(NodeIdFile, MissingDirectoryIsTheSystemsError) {
  auto r = node_id_file(dir_ + "/no/such/dir/id");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), std::error_code(ENOENT, std::system_category()));
}

}  // namespace
}  // namespace rmsg
