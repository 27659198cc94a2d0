// rmsg-objstore-server --listen HOST:PORT [--transport tcp|rdma] [--node N]
// Serves the object store (store.h) until killed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rmsg/rpc.h"
#include "store.h"

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:7400";
  std::string transport = "tcp";
  rmsg::NodeId node = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--listen") {
      listen = argv[i + 1];
    } else if (a == "--transport") {
      transport = argv[i + 1];
    } else if (a == "--node") {
      node = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: rmsg-objstore-server --listen HOST:PORT [--transport tcp|rdma] "
                   "[--node N]\n");
      return 2;
    }
  }
  auto loop = rmsg::EventLoop::create();
  if (!loop) return 1;
  auto ep = rmsg::RpcEndpoint::create(**loop, rmsg::objstore::store_options(node));
  if (!ep) {
    std::fprintf(stderr, "objstore: %s\n", ep.error().message().c_str());
    return 1;
  }
  rmsg::objstore::Server server(**ep);
  auto addr = rmsg::SocketAddress::parse(listen);
  if (!addr) {
    std::fprintf(stderr, "objstore: bad --listen '%s'\n", listen.c_str());
    return 2;
  }
  rmsg::ConnectionParams params;
  params.transport = transport == "rdma" ? rmsg::Transport::rdma : rmsg::Transport::tcp;
  auto bound = (*ep)->messenger().listen(addr.value(), params);
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
