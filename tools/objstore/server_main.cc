// rmsg-objstore-server [--listen HOST:PORT] [--transport tcp|rdma] [--node N]
// Serves the object store (store.h) until killed. --help prints the usage; a bad or
// incomplete argument prints why and exits 2 without serving.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "args.h"
#include "rmsg/rpc.h"
#include "store.h"

namespace {

constexpr const char* kUsage =
    "usage: rmsg-objstore-server [--listen HOST:PORT] [--transport tcp|rdma] [--node N]\n"
    "  --listen     numeric address to serve on (default 127.0.0.1:7400)\n"
    "  --transport  tcp (default) or rdma\n"
    "  --node       this server's node id, 1 or more (default 1; clients call node 1)\n"
    "Keeps keys and values in memory: a restart empties the store.\n";

int usage_error() {
  std::fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:7400";
  std::string transport = "tcp";
  rmsg::NodeId node = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a != "--listen" && a != "--transport" && a != "--node") {
      std::fprintf(stderr, "objstore: unknown argument '%s'\n", argv[i]);
      return usage_error();
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "objstore: %s needs a value\n", argv[i]);
      return usage_error();
    }
    const std::string_view v = argv[++i];
    if (a == "--listen") {
      listen = v;
    } else if (a == "--transport") {
      if (!rmsg::objstore::parse_transport(v)) return 2;
      transport = v;
    } else {
      auto n = rmsg::objstore::parse_number(a, v, 1);
      if (!n) return 2;
      node = *n;
    }
  }
  auto addr = rmsg::objstore::parse_address("--listen", listen);
  if (!addr) return 2;
  auto loop = rmsg::EventLoop::create();
  if (!loop) return 1;
  auto ep = rmsg::RpcEndpoint::create(**loop, rmsg::objstore::store_options(node));
  if (!ep) {
    std::fprintf(stderr, "objstore: %s\n", ep.error().message().c_str());
    return 1;
  }
  rmsg::objstore::Server server(**ep);
  rmsg::ConnectionParams params;
  params.transport = transport == "rdma" ? rmsg::Transport::rdma : rmsg::Transport::tcp;
  auto bound = (*ep)->messenger().listen(*addr, params);
  if (!bound) {
    std::fprintf(stderr, "objstore: listen %s: %s\n", listen.c_str(),
                 bound.error().message().c_str());
    return 1;
  }
  std::printf("objstore: node %llu serving on %s (%s)\n", static_cast<unsigned long long>(node),
              bound.value().c_str(), transport.c_str());
  std::fflush(stdout);
  auto r = (*loop)->run();
  return r ? 0 : 1;
}
