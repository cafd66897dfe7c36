# SPDX-License-Identifier: Apache-2.0
# dtrain's warning flags for its own targets; call dtrain_target_defaults() on each.
# Warnings become errors only with DTRAIN_WERROR, which development and CI turn on: sites and
# packagers build with newer compilers than ours, and a warning new to their compiler must not
# stop their build.
option(DTRAIN_WERROR "Treat compiler warnings in dtrain's own code as errors (development, CI)" OFF)
set(DTRAIN_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Wformat=2 -Wimplicit-fallthrough)
set(DTRAIN_CUDA_WARNINGS -Xcompiler=-Wall,-Wextra)
if(DTRAIN_WERROR)
  list(APPEND DTRAIN_WARNINGS -Werror)
  list(APPEND DTRAIN_CUDA_WARNINGS -Xcompiler=-Werror --Werror=all-warnings)
endif()

set(DTRAIN_HARDENING_COMPILE -fstack-protector-strong)
set(DTRAIN_HARDENING_LINK -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)

if(DTRAIN_SANITIZE)
  set(DTRAIN_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${DTRAIN_SANITIZER_FLAGS})
  add_link_options(${DTRAIN_SANITIZER_FLAGS})
  if(DTRAIN_FUZZ)
    # libFuzzer's coverage feedback from every dtrain library the fuzz targets link.
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>)
  endif()
endif()

function(dtrain_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${DTRAIN_WARNINGS}> ${DTRAIN_HARDENING_COMPILE})
  if(NOT DTRAIN_SANITIZE)
    # _FORTIFY_SOURCE needs optimisation and clashes with ASan's interceptors.
    target_compile_definitions(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2>)
  endif()
  target_link_options(${target} PRIVATE ${DTRAIN_HARDENING_LINK})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
endfunction()
