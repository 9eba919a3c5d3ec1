# What `cmake --install` puts under the prefix: include/cclz/cclz.h, lib/libcclz.so (and the
# drop-in lib/libcclz_nccl.so where NCCL was found) and lib/cmake/cclz/ (cclzConfig.cmake, its
# version file and the exported target cclz::cclz), so that a CMake project uses an installed
# cclz with find_package(cclz) and target_link_libraries(app PRIVATE cclz::cclz). Only the public
# boundary is installed: the internal target (cclz_core), the tests and the tools stay in the
# build tree.
include(CMakePackageConfigHelpers)

install(TARGETS cclz EXPORT cclzTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/cclz/cclz.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cclz)

set(CCLZ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cclz)
install(EXPORT cclzTargets NAMESPACE cclz:: DESTINATION ${CCLZ_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cclzConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cclzConfig.cmake
                              INSTALL_DESTINATION ${CCLZ_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cclzConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cclzConfig.cmake ${PROJECT_BINARY_DIR}/cclzConfigVersion.cmake
        DESTINATION ${CCLZ_CMAKE_DIR})

# libcclz_nccl.so, the LD_PRELOAD drop-in (built where NCCL is), beside libcclz, which it loads
# from there (its RUNPATH is $ORIGIN). Nothing links it: it is no part of the exported targets.
if(TARGET cclz_interpose)
  install(TARGETS cclz_interpose LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# pip install . (scikit-build-core sets SKBUILD): libcclz.so goes inside the Python package, next
# to the module that loads it (python/cclz/_capi.py), as the component the wheel installs.
if(SKBUILD)
  # One file, as the module opens it (a wheel holds no symbolic links); libcclz_nccl.so, beside
  # it, loads it by that name.
  install(FILES $<TARGET_FILE:cclz> DESTINATION cclz RENAME libcclz.so COMPONENT python)
  if(TARGET cclz_interpose)
    install(TARGETS cclz_interpose LIBRARY DESTINATION cclz COMPONENT python)
  endif()
endif()
