# rmsg_rdma_test(NAME [TIMEOUT SECONDS] [ISOLATED GTEST_FILTER] SOURCES...): a gtest binary
# (linked with rmsg, so with libibverbs and librdmacm) whose cases run inside the Soft-RoCE
# guest, TIMEOUT seconds each (default 60). The guest runs the binary's cases in one
# process (a process start costs 0.5-1.5 s there) and falls back to one process per case
# when that run fails; cases matching ISOLATED (a positive gtest filter: those that take
# the device or its port away, or need a process that never opened it) always get their
# own process (tier/guest-tier.sh). Usable from any tests/ folder, in any order: the tier
# is assembled once the whole tests/ folder has been read.
#
# CTest, label `rdma`: `rdma_tier` (RUN_SERIAL, a fixture) boots ONE guest that runs every
# case of every binary, each in its own process; then one test per case, `NAME.Suite.Case`,
# reports that case's result (see tier/discover.cmake). Without RMSG_WITH_RDMA the
# function adds nothing: guard later target_* calls with if(TARGET NAME).
include_guard(GLOBAL)
set(RMSG_SOFTROCE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(rmsg_rdma_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT;ISOLATED" "")
  if(NOT RMSG_WITH_RDMA)
    message(STATUS "rmsg: ${name} not built (RMSG_WITH_RDMA is OFF)")
    return()
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 60)
  endif()
  add_executable(${name} ${arg_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE rmsg_internal rmsg_test_kit_rdma rmsg_test_main)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  set_property(GLOBAL APPEND PROPERTY RMSG_RDMA_TESTS
               "${name}|$<TARGET_FILE:${name}>|${arg_TIMEOUT}|${arg_ISOLATED}")
endfunction()

# Runs at the end of the folder that included this file, after all its subfolders.
function(_rmsg_rdma_tier)
  get_property(entries GLOBAL PROPERTY RMSG_RDMA_TESTS)
  if(NOT entries)
    return()
  endif()
  set(dir ${CMAKE_BINARY_DIR}/softroce)
  list(JOIN entries "\n" manifest)
  file(GENERATE OUTPUT ${dir}/rdma-tier.manifest CONTENT "${manifest}\n")
  add_test(NAME rdma_tier COMMAND ${RMSG_SOFTROCE_DIR}/tier/run-tier ${CMAKE_BINARY_DIR} 840)
  set_tests_properties(rdma_tier PROPERTIES LABELS rdma RUN_SERIAL TRUE TIMEOUT 900
                       FIXTURES_SETUP rmsg_rdma_guest)
  file(WRITE ${dir}/rdma-tier-tests.cmake
       "set(rmsg_rdma_manifest \"${dir}/rdma-tier.manifest\")\n"
       "set(rmsg_rdma_results \"${dir}/results\")\n"
       "set(rmsg_rdma_reporter \"${RMSG_SOFTROCE_DIR}/tier/report-case\")\n"
       "include(\"${RMSG_SOFTROCE_DIR}/tier/discover.cmake\")\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${dir}/rdma-tier-tests.cmake)
endfunction()
cmake_language(DEFER CALL _rmsg_rdma_tier)
