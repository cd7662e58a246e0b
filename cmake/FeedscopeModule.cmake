# feedscope_module(NAME SOURCES ... [PUBLIC_LINKS ...] [PRIVATE_LINKS ...])
# One static library per module folder, named feedscope_<NAME>, with the project's warnings.
# Links only what DESIGN.md's arrows allow, so a wrong include fails to link.
# Warnings are errors in the GCC build that CI runs. The clang fuzz build (FEEDSCOPE_FUZZ) reports
# clang's own extra warnings without stopping: it exists to run the fuzzers. FEEDSCOPE_WERROR=OFF
# does the same for another compiler (scripts/device_check.sh, on a machine whose GCC is newer
# than CI's and may warn where CI's does not).
function(feedscope_warnings target)
  if(FEEDSCOPE_FUZZ OR NOT FEEDSCOPE_WERROR)
    target_compile_options(${target} PRIVATE -Wall -Wextra)
  else()
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-error=deprecated-declarations>
      # GCC 12 at -O3 (Release) warns inside libstdc++'s std::string concatenation that a copy
      # may overlap itself (GCC bug 105329, fixed in GCC 13): still shown, no longer fatal there.
      $<$<AND:$<COMPILE_LANG_AND_ID:CXX,GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-error=restrict>)
  endif()
endfunction()

function(feedscope_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_LINKS;PRIVATE_LINKS" ${ARGN})
  set(target feedscope_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  # Modules include one another by their folder ("loader/batch_loader.h") and the public headers
  # as users do (<feedscope/session.h>, version.h generated into the build).
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include
                                              ${PROJECT_BINARY_DIR}/include)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LINKS} PRIVATE ${ARG_PRIVATE_LINKS})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  feedscope_warnings(${target})
  feedscope_unity(${target})
endfunction()

# feedscope_unity(TARGET): TARGET's C++ sources compiled a few to a translation unit, so the
# headers they share (nlohmann/json, spdlog, CLI11, the std library) are parsed once per batch
# instead of once per file. A clean build's library objects on 2 cores: see docs/building.md.
# FEEDSCOPE_UNITY_BUILD=OFF compiles file by file (quicker rebuilds of one edited file).
function(feedscope_unity target)
  if(FEEDSCOPE_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 6)
    # In a unity source every .cc is an included file, and GCC warns that a class there with a
    # member of an anonymous-namespace type (a file's own Impl) could be seen from another file.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  endif()
endfunction()

# feedscope_torch_sources(TARGET SOURCES...): the sources of TARGET that include libtorch's
# headers. Parsing <torch/torch.h> is two thirds of such a file's compile time (cli/trainer.cc:
# 21 s of 31 s), so they share one precompiled header, built once (feedscope_torch_pch below);
# TARGET's other sources skip it and never see torch. No debug info either: libtorch's templates
# make -g cost 2.6x the compile time (trainer.cc: 103 s against 39 s) for symbols nobody steps
# through. Call it in the directory that compiles the sources.
function(feedscope_torch_sources target)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "-g0" SKIP_UNITY_BUILD_INCLUSION ON)
  target_precompile_headers(${target} REUSE_FROM feedscope_torch_pch)
  # GCC uses a PCH only with the code model it was made with: -fPIC, which an executable's
  # objects may use as well (CMake would give them -fPIE).
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    target_compile_options(${target} PRIVATE -fPIC)
  else()
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  get_target_property(_all ${target} SOURCES)
  list(REMOVE_ITEM _all ${ARGN})
  if(_all)
    set_source_files_properties(${_all} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# The one <torch/torch.h> precompiled header, with the flags every torch source compiles with.
function(feedscope_add_torch_pch)
  add_library(feedscope_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cc)
  target_link_libraries(feedscope_torch_pch PRIVATE torch)
  set_target_properties(feedscope_torch_pch PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(feedscope_torch_pch PRIVATE -g0)
  feedscope_warnings(feedscope_torch_pch)
  target_precompile_headers(feedscope_torch_pch PRIVATE <torch/torch.h>)
endfunction()
