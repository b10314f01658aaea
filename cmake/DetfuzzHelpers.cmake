# Warnings for every detfuzz target; -Werror with DETFUZZ_WERROR=ON (CI turns it on).
function(detfuzz_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  if(DETFUZZ_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# The one helper that adds every test: a GoogleTest executable whose cases CTest discovers.
#   detfuzz_add_test(NAME SOURCES a.cpp b.cpp LIBS lib1 lib2 [FIXTURES_REQUIRED fixture])
function(detfuzz_add_test name)
  cmake_parse_arguments(ARG "" "FIXTURES_REQUIRED" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/tests)
  detfuzz_set_warnings(${name})
  set(properties ENVIRONMENT "DETFUZZ_BINARY=$<TARGET_FILE:detfuzz>")
  if(ARG_FIXTURES_REQUIRED)
    list(APPEND properties FIXTURES_REQUIRED ${ARG_FIXTURES_REQUIRED})
  endif()
  gtest_discover_tests(${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    PROPERTIES ${properties}
    DISCOVERY_TIMEOUT 60)
endfunction()
