# The layers of librmsg: the one table of which layer may use which (docs/architecture.md's
# table is checked against it by lint.layers). Each folder under src/ is an OBJECT library
# rmsg_<layer> (an INTERFACE one when it has no sources) whose link edges are exactly the
# layers it may use; librmsg is the union of their objects.
#
# A wrong include fails the build: a layer's sources are compiled against a generated include
# tree, build/layers/<layer>/, that holds links to its own folder, to the folders of the
# layers it may use, and to those layers' public headers (rmsg/<header>), nothing else. There
# is no -I for src/ or include/ on a layer, so "msg/x.h" in src/loop is "file not found".
# tests/install/layer_probe.sh proves it on the real targets.
#
# rmsg_layer(NAME [USES layer...] [HEADERS public-header...] [NO_SOURCES] [OWN_LIBRARY] [RDMA])
#   USES     the layers below it that NAME may include and link (no transitive closure:
#            what it uses is spelled out)
#   HEADERS  the headers of include/rmsg/ that belong to NAME
#   NO_SOURCES  a layer of headers only (an INTERFACE library; no src/<layer>/CMakeLists.txt)
#   OWN_LIBRARY  not part of librmsg: the layer's CMakeLists.txt makes its own library of it
#               (the socket shim: librmsg-socket)
#   RDMA     only in RMSG_WITH_RDMA builds (otherwise the layer has no target and its folder
#            is reachable from no other layer). verbs and rdma are not RDMA layers: without
#            RDMA their CMakeLists.txt compiles unavailable.cc, so the installed
#            rmsg/rdma.h and rmsg/rdma_errors.h are defined (Errc::not_supported).
set_property(GLOBAL PROPERTY RMSG_LAYER_TABLE "")
set(RMSG_LAYERS "")

function(rmsg_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "RDMA;NO_SOURCES;OWN_LIBRARY" "" "USES;HEADERS")
  set(root ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/rmsg)
  foreach(layer ${name} ${arg_USES})
    if(NOT layer STREQUAL name AND NOT DEFINED RMSG_LAYER_CLOSURE_${layer})
      message(FATAL_ERROR "layer ${name} uses ${layer}, which is not declared below it")
    endif()
    if(NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${layer})
      message(FATAL_ERROR "layer ${layer} has no folder src/${layer}")
    endif()
    # Without RDMA the RDMA layers are public headers only: their folders are not reachable.
    if(NOT RMSG_LAYER_OFF_${layer})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${layer} ${root}/${layer} SYMBOLIC)
    endif()
  endforeach()
  foreach(header ${arg_HEADERS})
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/include/rmsg/${header})
      message(FATAL_ERROR "layer ${name}: include/rmsg/${header} does not exist")
    endif()
  endforeach()
  # Public headers: those of every layer below it reaches, directly or through what it uses
  # (rmsg/connection_manager.h includes rmsg/rdma.h, so whatever uses cm sees rdma.h).
  set(closure ${name})
  foreach(layer ${arg_USES})
    list(APPEND closure ${RMSG_LAYER_CLOSURE_${layer}})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(headers ${arg_HEADERS})
  foreach(layer ${closure})
    list(APPEND headers ${RMSG_LAYER_HEADERS_${layer}})
  endforeach()
  foreach(header ${headers})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/rmsg/${header} ${root}/rmsg/${header} SYMBOLIC)
  endforeach()
  set(RMSG_LAYER_HEADERS_${name} ${arg_HEADERS} PARENT_SCOPE)
  set(RMSG_LAYER_CLOSURE_${name} ${closure} PARENT_SCOPE)
  string(REPLACE ";" " " uses "${arg_USES}")
  string(REPLACE ";" " " headers "${arg_HEADERS}")
  set_property(GLOBAL APPEND_STRING PROPERTY RMSG_LAYER_TABLE "${name}|${headers}|${uses}\n")

  if(arg_RDMA AND NOT RMSG_WITH_RDMA)
    set(RMSG_LAYER_OFF_${name} TRUE PARENT_SCOPE)
    return()
  endif()
  set(target rmsg_${name})
  if(NOT arg_NO_SOURCES)
    add_library(${target} OBJECT)
    target_include_directories(${target} PRIVATE ${root})
    # Hidden by default: librmsg exports only what include/rmsg/ marks RMSG_EXPORT. PIC, so one
    # set of objects makes the static and the shared library; -fno-semantic-interposition keeps
    # exported functions inlinable inside the library, as they were before.
    set_target_properties(${target} PROPERTIES EXPORT_COMPILE_COMMANDS ON
      CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
      POSITION_INDEPENDENT_CODE ON)
    target_compile_options(${target} PRIVATE -fno-semantic-interposition)
    if(RMSG_WITH_RDMA)
      target_compile_definitions(${target} PRIVATE RMSG_WITH_RDMA=1)
    endif()
    set(scope PRIVATE)
    add_subdirectory(${PROJECT_SOURCE_DIR}/src/${name} ${CMAKE_BINARY_DIR}/src/${name})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  foreach(layer ${arg_USES})
    if(TARGET rmsg_${layer})
      target_link_libraries(${target} ${scope} rmsg_${layer})
    endif()
  endforeach()
  set(RMSG_LAYERS ${RMSG_LAYERS} ${name} PARENT_SCOPE)
  if(arg_OWN_LIBRARY)
    set(RMSG_LAYER_OWN_LIBRARY_${name} TRUE PARENT_SCOPE)
  endif()
endfunction()

# rmsg_layer_include(TARGET LAYER): compile TARGET's sources against LAYER's include tree
# (the socket shim's preload compiles the posix layer's sources a second time).
function(rmsg_layer_include target layer)
  target_include_directories(${target} PRIVATE ${CMAKE_BINARY_DIR}/layers/${layer})
endfunction()

# Lowest first.
#          layer   may use                                       public headers
rmsg_layer(base                                                  HEADERS result.h log.h counters.h address.h export.h node_id.h)
rmsg_layer(loop    USES base                                     HEADERS event_loop.h loop_time.h loop_threads.h)
rmsg_layer(stream  USES base loop                                HEADERS stream.h NO_SOURCES)
rmsg_layer(tcp     USES base loop stream                         HEADERS tcp.h)
rmsg_layer(verbs   USES base loop                                HEADERS rdma_errors.h)
rmsg_layer(rdmacm  USES base loop verbs                          RDMA)
rmsg_layer(rdma    USES base loop stream verbs rdmacm            HEADERS rdma.h)
rmsg_layer(cm      USES base loop stream tcp verbs rdmacm rdma   HEADERS connection_manager.h)
rmsg_layer(wire    USES base)
rmsg_layer(auth    USES base)
rmsg_layer(session USES base loop wire                           HEADERS messenger_errors.h)
rmsg_layer(msg     USES base loop stream cm wire session auth HEADERS messenger.h)
rmsg_layer(rpc     USES base loop wire session msg                HEADERS rpc.h)
rmsg_layer(admin   USES base loop session msg                     HEADERS admin.h)
# The socket shim is its own library, librmsg-socket, plus the preload module
# (docs/socket-shim.md); only its RDMA upgrade engine (upgrade_*.cc) uses the layers below.
rmsg_layer(posix   USES base loop stream verbs rdmacm rdma       HEADERS socket.h OWN_LIBRARY)

# Every public header belongs to one layer.
file(GLOB rmsg_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include/rmsg
     ${PROJECT_SOURCE_DIR}/include/rmsg/*.h)
set(rmsg_assigned "")
foreach(layer base loop stream tcp verbs rdmacm rdma cm wire auth session msg rpc admin posix)
  list(APPEND rmsg_assigned ${RMSG_LAYER_HEADERS_${layer}})
endforeach()
foreach(header ${rmsg_public_headers})
  if(NOT header IN_LIST rmsg_assigned)
    message(FATAL_ERROR "include/rmsg/${header} belongs to no layer: add it to cmake/layers.cmake")
  endif()
endforeach()
# No folder under src/ holds more than RMSG_MAX_FOLDER_SOURCES source files (.h, .cc, .c):
# a folder that needs more is several concepts, and becomes several layers (or subfolders).
# Counted at configure time, which adding a source re-runs (its target_sources line).
set(RMSG_MAX_FOLDER_SOURCES 35)
file(GLOB_RECURSE rmsg_src_dirs LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/src/*)
foreach(dir ${PROJECT_SOURCE_DIR}/src ${rmsg_src_dirs})
  if(NOT IS_DIRECTORY ${dir})
    continue()
  endif()
  file(GLOB rmsg_dir_sources ${dir}/*.h ${dir}/*.cc ${dir}/*.c)
  list(LENGTH rmsg_dir_sources rmsg_dir_count)
  if(rmsg_dir_count GREATER RMSG_MAX_FOLDER_SOURCES)
    file(RELATIVE_PATH rmsg_dir_name ${PROJECT_SOURCE_DIR} ${dir})
    message(FATAL_ERROR "${rmsg_dir_name}/ holds ${rmsg_dir_count} source files (.h, .cc, .c); "
            "the most a folder under src/ may hold is ${RMSG_MAX_FOLDER_SOURCES}: split it into "
            "layers or subfolders by concept (docs/architecture.md, Layers)")
  endif()
endforeach()

get_property(rmsg_layer_table GLOBAL PROPERTY RMSG_LAYER_TABLE)
file(WRITE ${CMAKE_BINARY_DIR}/layers.txt "${rmsg_layer_table}")
