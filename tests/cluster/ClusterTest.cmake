# Registration of tests that need the local Slurm cluster of slurm/local/cluster.sh.
# Included from tests/CMakeLists.txt before its subdirectories, so every test folder can call
# dtrain_add_cluster_test(); tests/cluster/CMakeLists.txt adds the cluster_up/cluster_down fixture.
include_guard(GLOBAL)

# Every emulated node has a private /tmp, so the state, the test binaries and their working
# directories must all live outside /tmp.
set(DTRAIN_CLUSTER_STATE_DIR ${CMAKE_BINARY_DIR}/cluster)
set(DTRAIN_CLUSTER_SCRIPT ${PROJECT_SOURCE_DIR}/slurm/local/cluster.sh)
set(DTRAIN_CLUSTER_FIXTURE slurm_cluster)
set(DTRAIN_CLUSTER_RESOURCE_LOCK slurm_cluster)
set(DTRAIN_CLUSTER_ENV_RUNNER ${CMAKE_CURRENT_LIST_DIR}/run_with_cluster_env.sh)
if(CMAKE_BINARY_DIR MATCHES "^/tmp(/|$)")
  message(WARNING "dtrain: the cluster tests cannot run from a build tree under /tmp "
                  "(${CMAKE_BINARY_DIR}): every emulated node has a private /tmp. "
                  "Configure with -B outside /tmp.")
endif()

# dtrain_add_cluster_test(NAME name COMMAND cmd [args...] [TIMEOUT seconds]
#                         [WORKING_DIRECTORY dir] [LABELS label...] [ENVIRONMENT VAR=value...])
# Runs COMMAND with the cluster's env.sh sourced (SLURM_CONF, loopback-only Open MPI), after the
# cluster_up fixture and one cluster test at a time. COMMAND is not the first word of add_test's
# command, so refer to targets as $<TARGET_FILE:target>.
function(dtrain_add_cluster_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;TIMEOUT;WORKING_DIRECTORY"
                        "COMMAND;LABELS;ENVIRONMENT")
  if(NOT arg_NAME OR NOT arg_COMMAND)
    message(FATAL_ERROR "dtrain_add_cluster_test: NAME and COMMAND are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dtrain_add_cluster_test(${arg_NAME}): unknown arguments "
                        "${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 60)
  endif()
  if(NOT arg_WORKING_DIRECTORY)
    set(arg_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  add_test(NAME ${arg_NAME}
           COMMAND ${DTRAIN_CLUSTER_ENV_RUNNER} ${DTRAIN_CLUSTER_STATE_DIR} ${arg_COMMAND}
           WORKING_DIRECTORY ${arg_WORKING_DIRECTORY})
  set_tests_properties(${arg_NAME} PROPERTIES
    LABELS "cluster;${arg_LABELS}"
    FIXTURES_REQUIRED ${DTRAIN_CLUSTER_FIXTURE}
    RESOURCE_LOCK ${DTRAIN_CLUSTER_RESOURCE_LOCK}
    TIMEOUT ${arg_TIMEOUT})
  if(arg_ENVIRONMENT)
    set_property(TEST ${arg_NAME} APPEND PROPERTY ENVIRONMENT ${arg_ENVIRONMENT})
  endif()
endfunction()
