include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS rmsg rmsg_socket rmsg_testing EXPORT rmsgTargets
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

# pkg-config: rmsg (the C++ library) and rmsg-socket (the C socket API). A static library's
# dependencies go to Libs, so `pkg-config --cflags --libs rmsg` links without --static; a
# shared one needs them only in Libs.private. librmsg-socket is C++ inside: a C program
# linking the static one needs the C++ runtime, so it is on its line.
set(RMSG_PC_DEPS "-lcrypto -lpthread -ldl")
set(RMSG_PC_CFLAGS "")
if(RMSG_WITH_RDMA)
  set(RMSG_PC_DEPS "-lrdmacm -libverbs -lcrypto -lpthread -ldl")
  set(RMSG_PC_CFLAGS "-DRMSG_WITH_RDMA=1")  # as find_package's rmsg::rmsg says
endif()
set(RMSG_SOCKET_PC_DEPS "-ldl -lstdc++ -lm")
if(BUILD_SHARED_LIBS)
  set(RMSG_PC_LIBS "")
  set(RMSG_PC_LIBS_PRIVATE "${RMSG_PC_DEPS}")
  set(RMSG_SOCKET_PC_LIBS "")
  set(RMSG_SOCKET_PC_LIBS_PRIVATE "${RMSG_SOCKET_PC_DEPS}")
else()
  set(RMSG_PC_LIBS "${RMSG_PC_DEPS}")
  set(RMSG_PC_LIBS_PRIVATE "")
  set(RMSG_SOCKET_PC_LIBS "${RMSG_SOCKET_PC_DEPS}")
  set(RMSG_SOCKET_PC_LIBS_PRIVATE "")
endif()
# Relocatable: the prefix is found relative to the .pc file (libdir may be multiarch).
file(RELATIVE_PATH RMSG_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${CMAKE_SOURCE_DIR}/cmake/rmsg.pc.in ${CMAKE_BINARY_DIR}/rmsg.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/rmsg-socket.pc.in ${CMAKE_BINARY_DIR}/rmsg-socket.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rmsg.pc ${CMAKE_BINARY_DIR}/rmsg-socket.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
