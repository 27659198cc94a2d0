# Read by ctest (a TEST_INCLUDE_FILES script) each time it loads the test list: adds one
# test per gtest case of each RDMA binary in the manifest. Each such test only reports
# the result that the rdma_tier fixture (one guest boot for all) left for its case.
# Set by the includer: rmsg_rdma_manifest, rmsg_rdma_results, rmsg_rdma_reporter.
file(STRINGS "${rmsg_rdma_manifest}" rmsg_rdma_entries)
foreach(entry IN LISTS rmsg_rdma_entries)
  # NAME|BINARY|TIMEOUT|ISOLATED (the last field may be empty: no list() on it).
  string(REGEX MATCH "^([^|]*)[|]([^|]*)" fields "${entry}")
  set(name "${CMAKE_MATCH_1}")
  set(binary "${CMAKE_MATCH_2}")
  execute_process(COMMAND "${binary}" --gtest_list_tests TIMEOUT 30
                  RESULT_VARIABLE rc OUTPUT_VARIABLE listing ERROR_VARIABLE listing_err)
  if(NOT rc EQUAL 0)
    add_test("${name}.NOT_LISTED" sh -c "echo 'cannot list ${binary}: ${rc}'; exit 1")
    set_tests_properties("${name}.NOT_LISTED" PROPERTIES LABELS rdma)
    continue()
  endif()
  # Lines are "Suite." then "  Case"; comments after '#' may hold list-breaking characters.
  string(REGEX REPLACE "[][;]" " " listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ #]+)")
      set(suite "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^  ([^ #]+)")
      set(test "${name}.${suite}${CMAKE_MATCH_1}")
      add_test("${test}" "${rmsg_rdma_reporter}" "${rmsg_rdma_results}" "${name}"
               "${suite}${CMAKE_MATCH_1}")
      set_tests_properties("${test}" PROPERTIES LABELS rdma TIMEOUT 30
                           FIXTURES_REQUIRED rmsg_rdma_guest)
    endif()
  endforeach()
endforeach()
