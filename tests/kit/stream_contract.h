// The Stream-contract suite: the same cases, from rmsg/stream.h's contract, against every
// transport (loopback and TCP on the host, RDMA in the Soft-RoCE guest). A transport joins
// by implementing ContractTransport and instantiating the suite in its test binary:
//
//   namespace rmsg::testing { RMSG_INSTANTIATE_STREAM_CONTRACT(Tcp, make_my_transport); }
//
// and linking rmsg_stream_contract (the cases, tests/kit/stream_contract.cc). A case that
// fails on one transport only is a deviation of that transport from stream.h.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "rmsg/event_loop.h"
#include "rmsg/stream.h"

namespace rmsg::testing {

// One transport under test: a loop and connected pairs on it.
class ContractTransport {
 public:
  ContractTransport() = default;
  ContractTransport(const ContractTransport&) = delete;
  ContractTransport& operator=(const ContractTransport&) = delete;
  virtual ~ContractTransport() = default;

  virtual EventLoop& loop() = 0;
  // A connected {client, server} on loop(), with buffers small enough that a writer whose
  // peer does not read meets would_block within a few MiB. On failure: ADD_FAILURE() and
  // empty handles.
  virtual std::pair<Stream, Stream> connect_pair() = 0;
};

struct ContractParam {
  std::string name;
  // Null (after ADD_FAILURE()) when the transport cannot run here: the case fails.
  std::function<std::unique_ptr<ContractTransport>()> make;
};
// gtest (and so CTest's test names) show the parameter by its name.
inline void PrintTo(const ContractParam& param, std::ostream* out) {
  *out << param.name;
}

class StreamContract : public ::testing::TestWithParam<ContractParam> {
 protected:
  void SetUp() override;
  void TearDown() override;
  EventLoop& loop() { return transport_->loop(); }
  std::pair<Stream, Stream> connect_pair() { return transport_->connect_pair(); }

  std::unique_ptr<ContractTransport> transport_;
};

}  // namespace rmsg::testing

// Inside namespace rmsg::testing (gtest pastes the suite's name into identifiers).
#define RMSG_INSTANTIATE_STREAM_CONTRACT(prefix, factory)                                  \
  INSTANTIATE_TEST_SUITE_P(prefix, StreamContract,                                         \
                           ::testing::Values(ContractParam{#prefix, factory}),             \
                           [](const ::testing::TestParamInfo<ContractParam>& param_info) { \
                             return param_info.param.name;                                 \
                           })
