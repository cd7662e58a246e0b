# feedscope_module(NAME SOURCES ... [PUBLIC_LINKS ...] [PRIVATE_LINKS ...])
# One static library per module folder, named feedscope_<NAME>, with the project's warnings.
# Links only what DESIGN.md's arrows allow, so a wrong include fails to link.
function(feedscope_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-error=deprecated-declarations>)
endfunction()

function(feedscope_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_LINKS;PRIVATE_LINKS" ${ARGN})
  set(target feedscope_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LINKS} PRIVATE ${ARG_PRIVATE_LINKS})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  feedscope_warnings(${target})
endfunction()

# Sources that include libtorch's headers: no debug info. libtorch's templates make -g cost 2.6x
# the compile time (cli/trainer.cc: 103 s against 39 s on this 2-core machine) for symbols nobody
# steps through. Call it in the directory that compiles the sources.
function(feedscope_torch_sources)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "-g0")
endfunction()
