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
