# `cmake --install build --prefix P`: the static libraries, the public headers under
# P/include/meshtrain/, the meshtrain binary, and the CMake package that find_package(meshtrain)
# reads (P/lib/cmake/meshtrain/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MESHTRAIN_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/meshtrain)
list(TRANSFORM MESHTRAIN_COMPONENTS PREPEND meshtrain_ OUTPUT_VARIABLE _meshtrain_libraries)
install(TARGETS meshtrain_library ${_meshtrain_libraries} EXPORT meshtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS meshtrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/meshtrain/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/meshtrain
        FILES_MATCHING PATTERN "*.h" PATTERN "*.inc"
        # The command line's own headers use CLI11; its API is command_line.h alone.
        REGEX "cli/(commands|config_file|declared_flags)\\.h$" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/meshtrain/config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/meshtrain)
install(EXPORT meshtrainTargets NAMESPACE meshtrain:: DESTINATION ${MESHTRAIN_PACKAGE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/meshtrainConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/meshtrainConfig.cmake
                              INSTALL_DESTINATION ${MESHTRAIN_PACKAGE_DIR})
# 0.x: a new minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/meshtrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/meshtrainConfig.cmake
              ${PROJECT_BINARY_DIR}/meshtrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/meshtrainFindDeps.cmake
        DESTINATION ${MESHTRAIN_PACKAGE_DIR})
