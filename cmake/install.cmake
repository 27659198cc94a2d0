include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS rmsg EXPORT rmsgTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/rmsg DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rmsgTargets NAMESPACE rmsg:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rmsg)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/rmsgConfig.cmake.in
  ${CMAKE_BINARY_DIR}/rmsgConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rmsg)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rmsgConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rmsgConfig.cmake ${CMAKE_BINARY_DIR}/rmsgConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rmsg)

set(RMSG_PC_LIBS_PRIVATE "-lpthread")
if(RMSG_WITH_RDMA)
  set(RMSG_PC_LIBS_PRIVATE "-lrdmacm -libverbs -lpthread")
endif()
# Relocatable: the prefix is found relative to the .pc file (libdir may be multiarch).
file(RELATIVE_PATH RMSG_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${CMAKE_SOURCE_DIR}/cmake/rmsg.pc.in ${CMAKE_BINARY_DIR}/rmsg.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rmsg.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
