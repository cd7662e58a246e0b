# `cpack -G DEB` in the build folder: feedscope_<version>_<arch>.deb of what `cmake --install` puts
# under /usr (docs/install.md). Its Depends come from the shared libraries it links
# (dpkg-shlibdeps), so `apt install ./feedscope_*.deb` pulls libtorch, oneTBB and the rest from
# Debian; `apt remove feedscope` takes back every file, the Python bytecode included (prerm).
set(CPACK_PACKAGE_NAME feedscope)
set(CPACK_PACKAGE_VENDOR feedscope)
set(CPACK_PACKAGE_CONTACT "feedscope maintainers <feedscope@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "A profiler and batch loader for PyTorch and libtorch training: it measures each stage that "
    "feeds the training step, names the one that holds training back, with evidence and the change "
    "that fixes it. The feedscope command (watch, attach, run, sweep, tune), the C++ wrap API and "
    "loader with their CMake package, and the Python client.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # feedscope_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
# The package's own libraries, and a CUDA toolkit's runtime where the build has one: not Debian's,
# so dpkg-shlibdeps has no package to name for it; the binary finds it by its RUNPATH.
set(_feedscope_private_dirs ${PROJECT_BINARY_DIR}/api ${PROJECT_BINARY_DIR}/profiler)
if(FEEDSCOPE_WITH_CUDA)
  list(APPEND _feedscope_private_dirs ${CUDAToolkit_LIBRARY_DIR})
endif()
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_feedscope_private_dirs})
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/prerm.in ${PROJECT_BINARY_DIR}/debian/prerm @ONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/debian/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Only what the package is for: the test suite, benchmarks and examples are not installed anyway.
set(CPACK_SOURCE_IGNORE_FILES "/build.*/" "/\\\\.git/" "__pycache__")
include(CPack)
