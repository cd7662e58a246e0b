# `cmake --install build --prefix P` (docs/install.md): the CLI on P/bin, its CUPTI injection library
# where an installed `feedscope watch` looks (P/lib/feedscope/), the libraries and public headers with
# their CMake package (find_package(feedscope): feedscope::feedscope, feedscope::loader) and
# pkg-config file, the Python package, the Grafana dashboard and Prometheus config under
# P/share/feedscope/. No path of this machine's source or build folder goes into an installed file:
# the CMake and pkg-config files find the prefix from where they lie. CPack makes the .deb of the same
# tree where feedscope is the top-level project.
include(CMakePackageConfigHelpers)

set(FEEDSCOPE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/feedscope CACHE STRING
    "Where find_package(feedscope) finds the package, below the prefix")
# Debian's system python3 reads /usr/lib/python3/dist-packages; another prefix goes on PYTHONPATH.
set(FEEDSCOPE_INSTALL_PYTHONDIR ${CMAKE_INSTALL_LIBDIR}/python3/dist-packages CACHE STRING
    "Where the Python package goes, below the prefix")

# --- The CLI and what it loads ----------------------------------------------------------------------
if(TARGET feedscope)
  install(TARGETS feedscope RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
if(TARGET feedscope_inject)
  # cli/watch.cc looks for it at <bin>/../lib/feedscope/libfeedscope_inject.so.
  install(TARGETS feedscope_inject LIBRARY DESTINATION lib/feedscope COMPONENT cli)
endif()

# --- The libraries, their headers and the CMake package ---------------------------------------------
set(_feedscope_libraries feedscope_lib)
if(TARGET feedscope_loader_lib)
  list(APPEND _feedscope_libraries feedscope_loader_lib)
endif()
install(TARGETS ${_feedscope_libraries} EXPORT feedscopeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libraries NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(_feedscope_headers session.h loop.h feedscope_c.h)
if(TARGET feedscope_loader_lib)
  list(APPEND _feedscope_headers loader.h)
endif()
list(TRANSFORM _feedscope_headers PREPEND ${PROJECT_SOURCE_DIR}/include/feedscope/)
install(FILES ${_feedscope_headers} ${PROJECT_BINARY_DIR}/include/feedscope/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/feedscope COMPONENT dev)
install(EXPORT feedscopeTargets NAMESPACE feedscope:: DESTINATION ${FEEDSCOPE_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/feedscopeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/feedscopeConfig.cmake
                              INSTALL_DESTINATION ${FEEDSCOPE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/feedscopeConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/feedscopeConfig.cmake ${PROJECT_BINARY_DIR}/feedscopeConfigVersion.cmake
        DESTINATION ${FEEDSCOPE_INSTALL_CMAKEDIR} COMPONENT dev)
file(RELATIVE_PATH FEEDSCOPE_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/feedscope.pc.in ${PROJECT_BINARY_DIR}/feedscope.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/feedscope.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

# --- The Python package -------------------------------------------------------------------------------
if(TARGET feedscope_c)
  install(TARGETS feedscope_c LIBRARY DESTINATION ${FEEDSCOPE_INSTALL_PYTHONDIR}/feedscope
          COMPONENT python)
  foreach(_f ${FEEDSCOPE_PYTHON_FILES})
    install(FILES ${PROJECT_SOURCE_DIR}/python/${_f} DESTINATION ${FEEDSCOPE_INSTALL_PYTHONDIR}/feedscope
            COMPONENT python)
  endforeach()
  # Its metadata, as a wheel's: feedscope.__version__ and `pip list` read the version there.
  configure_file(${PROJECT_SOURCE_DIR}/cmake/python-METADATA.in
                 ${PROJECT_BINARY_DIR}/python-dist-info/METADATA @ONLY)
  file(WRITE ${PROJECT_BINARY_DIR}/python-dist-info/INSTALLER "cmake\n")
  install(FILES ${PROJECT_BINARY_DIR}/python-dist-info/METADATA ${PROJECT_BINARY_DIR}/python-dist-info/INSTALLER
          DESTINATION ${FEEDSCOPE_INSTALL_PYTHONDIR}/feedscope-${PROJECT_VERSION}.dist-info
          COMPONENT python)
endif()

# --- Configs and documents ----------------------------------------------------------------------------
install(FILES ${PROJECT_SOURCE_DIR}/configs/grafana/feedscope-dashboard.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/feedscope/grafana COMPONENT configs)
install(FILES ${PROJECT_SOURCE_DIR}/configs/prometheus/prometheus.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/feedscope/prometheus COMPONENT configs)
install(FILES ${PROJECT_SOURCE_DIR}/configs/demo.yaml DESTINATION ${CMAKE_INSTALL_DATADIR}/feedscope
        COMPONENT configs)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT configs)

if(PROJECT_IS_TOP_LEVEL)
  include(FeedscopePackage)
endif()
