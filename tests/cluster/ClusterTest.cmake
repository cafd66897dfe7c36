# SPDX-License-Identifier: Apache-2.0
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
# The topology the plugin reads on the gres and site profiles: its four GPUs match the four gres
# devices cluster.sh gives every node.
set(DTRAIN_GRES_TOPOLOGY ${PROJECT_SOURCE_DIR}/tests/fixtures/topologies/gpu-order-differs.xml)
if(CMAKE_BINARY_DIR MATCHES "^/tmp(/|$)")
  message(WARNING "dtrain: the cluster tests cannot run from a build tree under /tmp "
                  "(${CMAKE_BINARY_DIR}): every emulated node has a private /tmp. "
                  "Configure with -B outside /tmp.")
endif()

# The site profiles (slurm/local/cluster.sh --profile) whose cluster runs the tests a folder
# registers: `default` (build/cluster, fixture slurm_cluster) unless the folder sets
# DTRAIN_CLUSTER_PROFILES before registering, as tests/CMakeLists.txt does for the suites that
# must also pass on `site`. Profile P other than default runs in build/cluster-P with fixture
# slurm_cluster_P (dtrain_add_cluster_fixture, called in tests/cluster/CMakeLists.txt), and its
# tests' names end in _P.
set(DTRAIN_CLUSTER_PROFILES default)

# dtrain_cluster_profile(P): sets cluster_state_dir, cluster_fixture and cluster_name_suffix
# (empty for default, _P otherwise) in the caller's scope.
function(dtrain_cluster_profile profile)
  if(profile STREQUAL "default")
    set(cluster_state_dir ${DTRAIN_CLUSTER_STATE_DIR} PARENT_SCOPE)
    set(cluster_fixture ${DTRAIN_CLUSTER_FIXTURE} PARENT_SCOPE)
    set(cluster_name_suffix "" PARENT_SCOPE)
  else()
    set(cluster_state_dir ${DTRAIN_CLUSTER_STATE_DIR}-${profile} PARENT_SCOPE)
    set(cluster_fixture ${DTRAIN_CLUSTER_FIXTURE}_${profile} PARENT_SCOPE)
    set(cluster_name_suffix _${profile} PARENT_SCOPE)
  endif()
endfunction()

# dtrain_add_cluster_fixture(P PLUGSTACK): cluster_up[_P] and cluster_down[_P], which start profile
# P's cluster with PLUGSTACK as its plugstack.conf and take it down after its tests.
function(dtrain_add_cluster_fixture profile plugstack)
  dtrain_cluster_profile(${profile})
  add_test(NAME cluster_up${cluster_name_suffix}
           COMMAND sh -c "mkdir -p '${cluster_state_dir}' && cp '${plugstack}' '${cluster_state_dir}/plugstack.conf' && exec '${DTRAIN_CLUSTER_SCRIPT}' up --state-dir '${cluster_state_dir}' --profile ${profile}")
  set_tests_properties(cluster_up${cluster_name_suffix} PROPERTIES
    FIXTURES_SETUP ${cluster_fixture} LABELS "cluster;profile-${profile}"
    RESOURCE_LOCK ${DTRAIN_CLUSTER_RESOURCE_LOCK} TIMEOUT 120)
  add_test(NAME cluster_down${cluster_name_suffix}
           COMMAND ${DTRAIN_CLUSTER_SCRIPT} down --state-dir ${cluster_state_dir})
  set_tests_properties(cluster_down${cluster_name_suffix} PROPERTIES
    FIXTURES_CLEANUP ${cluster_fixture} LABELS "cluster;profile-${profile}"
    RESOURCE_LOCK ${DTRAIN_CLUSTER_RESOURCE_LOCK} TIMEOUT 60)
endfunction()

# dtrain_add_cluster_test(NAME name COMMAND cmd [args...] [TIMEOUT seconds]
#                         [WORKING_DIRECTORY dir] [LABELS label...] [ENVIRONMENT VAR=value...]
#                         [SKIP_RETURN_CODE code] [FIXTURES_REQUIRED fixture...]
#                         [NOT_ON_PROFILES profile...])
# Runs COMMAND with the cluster's env.sh sourced (SLURM_CONF, the nodes' addresses, Open MPI on
# their subnet), after the cluster fixture and one cluster test at a time, once per profile of
# DTRAIN_CLUSTER_PROFILES (label profile-P). COMMAND is not the first word of add_test's
# command, so refer to targets as $<TARGET_FILE:target>. NOT_ON_PROFILES leaves profiles out,
# each with a comment at the call saying why.
function(dtrain_add_cluster_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;TIMEOUT;WORKING_DIRECTORY;SKIP_RETURN_CODE"
                        "COMMAND;LABELS;ENVIRONMENT;FIXTURES_REQUIRED;NOT_ON_PROFILES")
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
  foreach(profile IN LISTS DTRAIN_CLUSTER_PROFILES)
    if(profile IN_LIST arg_NOT_ON_PROFILES)
      continue()
    endif()
    dtrain_cluster_profile(${profile})
    set(name ${arg_NAME}${cluster_name_suffix})
    set(fixtures ${cluster_fixture} ${arg_FIXTURES_REQUIRED})
    add_test(NAME ${name}
             COMMAND ${DTRAIN_CLUSTER_ENV_RUNNER} ${cluster_state_dir} ${arg_COMMAND}
             WORKING_DIRECTORY ${arg_WORKING_DIRECTORY})
    set_tests_properties(${name} PROPERTIES
      LABELS "cluster;profile-${profile};${arg_LABELS}"
      FIXTURES_REQUIRED "${fixtures}"
      RESOURCE_LOCK ${DTRAIN_CLUSTER_RESOURCE_LOCK}
      TIMEOUT ${arg_TIMEOUT})
    if(arg_ENVIRONMENT)
      set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT ${arg_ENVIRONMENT})
    endif()
    if(DEFINED arg_SKIP_RETURN_CODE)
      set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${arg_SKIP_RETURN_CODE})
    endif()
  endforeach()
endfunction()
