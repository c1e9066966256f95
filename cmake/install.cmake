# libtrit.so beside libtrit.a, and what `cmake --install` puts in place:
#   lib/libtrit.so.X.Y.Z (+ SONAME link), lib/libtrit.a, include/trit/*.h, bin/trit,
#   lib/pkgconfig/trit.pc, lib/cmake/trit/trit-config.cmake (targets trit::trit, trit::trit_static).
# tests/install/test_install.sh installs into a temporary prefix and builds a program both ways.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Until 1.0 a minor version may change the ABI, so it is part of the SONAME (libtrit.so.0.1).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(TRIT_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  set(TRIT_PACKAGE_COMPAT SameMinorVersion)
else()
  set(TRIT_SOVERSION ${PROJECT_VERSION_MAJOR})
  set(TRIT_PACKAGE_COMPAT SameMajorVersion)
endif()

add_library(trit_shared SHARED ${TRIT_OBJECTS})
set_target_properties(trit_shared PROPERTIES OUTPUT_NAME trit VERSION ${PROJECT_VERSION}
  SOVERSION ${TRIT_SOVERSION} LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/trit.map)
target_include_directories(trit_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
target_link_libraries(trit_shared PRIVATE OpenMP::OpenMP_C PkgConfig::CJSON PkgConfig::ICU m)
if(TRIT_HAVE_MPI)
  target_link_libraries(trit_shared PRIVATE MPI::MPI_C)
endif()
# Only trit_ names are exported (the version script); the rest are the library's own.
target_link_options(trit_shared PRIVATE -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/trit.map)
if(NOT TRIT_SANITIZE AND NOT TRIT_FUZZ)  # clang leaves the sanitizer runtimes out of shared objects
  target_link_options(trit_shared PRIVATE -Wl,--no-undefined)
endif()
if(TRIT_FUZZ)
  set_target_properties(trit_shared PROPERTIES EXCLUDE_FROM_ALL ON)
endif()

install(TARGETS trit trit_shared
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development)
if(TARGET trit_cli)
  install(TARGETS trit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY include/trit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# pkg-config: the prefix is found from the .pc file's own place, so the installed tree can move.
file(RELATIVE_PATH TRIT_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" TRIT_PC_TO_PREFIX "${TRIT_PC_TO_PREFIX}")
string(REPLACE ";" " " TRIT_PC_OPENMP "${OpenMP_C_FLAGS}")
# A static link needs MPI's libraries too when the build has it (src/dist).
set(TRIT_PC_MPI "")
set(TRIT_CONFIG_MPI "")
if(TRIT_HAVE_MPI)
  string(REPLACE ";" " " TRIT_PC_MPI "${MPI_C_LIBRARIES}")
  set(TRIT_CONFIG_MPI ";${MPI_C_LIBRARIES}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/trit.pc.in ${PROJECT_BINARY_DIR}/trit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/trit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(TRIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/trit)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/trit-config.cmake.in
  ${PROJECT_BINARY_DIR}/trit-config.cmake INSTALL_DESTINATION ${TRIT_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/trit-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${TRIT_PACKAGE_COMPAT})
install(FILES ${PROJECT_BINARY_DIR}/trit-config.cmake ${PROJECT_BINARY_DIR}/trit-config-version.cmake
  DESTINATION ${TRIT_CMAKE_DIR})
