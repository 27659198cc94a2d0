# The messenger's fuzz targets, read by tests/fuzz/CMakeLists.txt (clang: libFuzzer
# binaries, `make fuzz`) and tests/wire/CMakeLists.txt (every tree: a replay of the committed
# corpus). Adding a target is one name here, plus NAME_fuzzer.cc and corpus/NAME/ in this
# folder (and its sources in RMSG_MSG_FUZZ_SOURCES when it tests new files).
set(RMSG_MSG_FUZZERS frame_decoder handshake session_handshake auth_handshake)
# The code under test, compiled into each libFuzzer binary with its instrumentation.
set(RMSG_MSG_FUZZ_SOURCES
    src/wire/crc32c.cc src/wire/crc32c_sse42.cc src/wire/banner.cc src/wire/frame.cc
    src/wire/frame_errors.cc src/wire/frame_encoder.cc src/wire/frame_decoder.cc
    src/base/errors.cc src/wire/session_frames.cc src/session/reconnect_decision.cc
    src/auth/auth_errors.cc src/auth/keys.cc src/auth/keyring.cc
    src/auth/proof.cc src/auth/exchange.cc)
# Inputs longer than this are cut by libFuzzer (frames with a few small segments fit).
set(RMSG_MSG_FUZZ_MAX_LEN 2048)
