# feedscope_require_package(NAME DEBIAN_PACKAGES [VERSION]): find_package(NAME [VERSION]), and where
# it is missing stop with the Debian packages that bring it, instead of CMake's search report. A pip
# install of the sdist shows this message; scripts/setup.sh installs them all.
# A macro, not a function: find_package's variables (Torch_VERSION, TORCH_CXX_FLAGS) are the caller's.
macro(feedscope_require_package name debian)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    string(JOIN " " _feedscope_wanted ${name} ${ARGN})
    message(FATAL_ERROR "feedscope needs ${_feedscope_wanted}, which was not found. On Debian "
                        "or Ubuntu: apt-get install ${debian} (scripts/setup.sh installs everything "
                        "feedscope builds with).")
  endif()
endmacro()

# feedscope_require_module(PREFIX PKG_CONFIG_MODULE DEBIAN_PACKAGE): pkg_check_modules(PREFIX
# IMPORTED_TARGET MODULE), with the same message where it is missing.
macro(feedscope_require_module prefix module debian)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "feedscope needs ${module} (pkg-config), which was not found. On Debian or "
                        "Ubuntu: apt-get install ${debian} (scripts/setup.sh installs everything "
                        "feedscope builds with).")
  endif()
endmacro()
