// Fixed Ed25519 test keys of the auth_handshake fuzzer and its seed generator
// (tests/wire/fuzz_corpus_gen.cc): with them a seed can hold a proof that verifies, so the
// fuzzer starts on the success path. Test keys only, public here: never use them.
#pragma once

#include <array>
#include <cstdint>

namespace rmsg::fuzz {

inline constexpr std::uint64_t kFuzzSelf = 2;  // the side under test (acceptor)
inline constexpr std::uint64_t kFuzzPeer = 1;  // the connector whose proof the seeds carry
inline constexpr char kFuzzSelfPem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIFNuYqK7zjuihN86LipLA60Rmg422yyoL8gVXF4CgGO2\n"
    "-----END PRIVATE KEY-----\n";
inline constexpr char kFuzzPeerPem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIDOjS5uiHplNFbFqs9f60VMGPbUr66AOA/rxuE/I5avz\n"
    "-----END PRIVATE KEY-----\n";
// The acceptor's own banner: feature bit 0, node kFuzzSelf, a nonce of 0x5A bytes.
inline constexpr std::uint8_t kFuzzNonceByte = 0x5A;

}  // namespace rmsg::fuzz
