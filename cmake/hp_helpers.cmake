# Shared build helpers: warnings and the torch precompiled header.

function(hp_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(HP_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# The torch precompiled header: tensors, autograd and NoGradGuard (<torch/types.h>, <torch/utils.h>,
# <torch/autograd.h>), what nearly every torch source uses. Not <torch/torch.h>: its nn, optim, data, jit and
# serialize parts double the header's size, and loading a precompiled header costs in proportion (7.4 s per
# translation unit for <torch/torch.h>, 3.3 s for these three, 2026-11-26); the few sources that need one of those
# include it themselves. hp_core precompiles it once; every other target reuses it (one per target costs minutes
# on 2 cores).
# TORCH_FREE: sources of a torch target that reach no torch header, directly or through ours; they skip the
# precompiled header (it would cost them its loading time for nothing). tests/layout/torch_free.py keeps these
# lists true in both directions.
# OpenMP: at::parallel_for is a header template whose `#pragma omp parallel` is compiled in our own
# translation units; without -fopenmp it silently runs the whole range on one thread. LibTorch uses
# the same libgomp, so both share one thread pool.
#   hp_use_torch(target [TORCH_FREE source...])
function(hp_use_torch target)
  cmake_parse_arguments(ARG "" "" "TORCH_FREE" ${ARGN})
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES} OpenMP::OpenMP_CXX)
  if(target STREQUAL "hp_core")
    target_precompile_headers(${target} PRIVATE <torch/types.h> <torch/utils.h> <torch/autograd.h>)
  else()
    target_precompile_headers(${target} REUSE_FROM hp_core)
  endif()
  if(ARG_TORCH_FREE)
    set_source_files_properties(${ARG_TORCH_FREE} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# Compiles text files into a generated header of raw string literals (cmake/embed_text.cmake):
#   hp_embed_text(target generated/dir/header.h hp::ns kSymbol path [kSymbol path ...])
# The header lands under the target's binary dir, which is added to its private include path.
function(hp_embed_text target header ns)
  set(items "")
  set(deps "")
  set(args ${ARGN})
  while(args)
    list(POP_FRONT args symbol path)
    list(APPEND items "${symbol}=${path}")
    list(APPEND deps "${path}")
  endwhile()
  string(JOIN "|" joined ${items})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/${header})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMESPACE=${ns} "-DITEMS=${joined}" -P ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS ${deps} ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    COMMENT "Embedding ${header}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
endfunction()
