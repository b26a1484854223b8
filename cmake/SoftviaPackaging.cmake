# Packaging of softvia's libraries: one pattern for every library, so that a new one
# (libsplitc, libsoftvia_shm, ...) is packaged with one call. Included from the
# top-level CMakeLists.txt before the subdirectories.
#
#   softvia_add_library_package(<target>
#       VERSION_SCRIPT <file>        # linker version script: what the library exports
#       DESCRIPTION <text>           # for the .pc file
#       [PCNAME <name>]              # <name>.pc; default: the target's name
#       [HEADERS <file>...]          # public headers, installed into include/
#       [REQUIRES_PRIVATE <pc>...]   # .pc files of the softvia libraries it links
#       [EXTRA_CFLAGS <flag>...]     # more Cflags / Libs for its users (the CMake target
#       [EXTRA_LIBS <flag>...])      # carries them as INTERFACE options itself)
#
# makes the shared library <target>
#   - libX.so.<PROJECT_VERSION> with SONAME libX.so.<major> (libX.so -> libX.so.<major>),
#   - export only what VERSION_SCRIPT names, and link with --no-undefined,
#   - install with its headers into the export set softviaTargets, so that
#     find_package(softvia) gives the target softvia::<target>,
#   - install <pcname>.pc for pkg-config.
# softvia_install_package(), called once after every subdirectory, installs the CMake
# package itself (softviaConfig.cmake, softviaConfigVersion.cmake, softviaTargets.cmake).
# tests/packaging/packaging_test.sh checks every installed library against this.
include(CMakePackageConfigHelpers)

set(SOFTVIA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/softvia)
set(SOFTVIA_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})

# Installed programs and libraries find softvia's libraries in the prefix they were
# installed into, wherever it is (RUNPATH; a program's own does not serve the
# dependencies of its libraries, so libamvia carries one to find libvipl).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CMAKE_INSTALL_RPATH "${CMAKE_INSTALL_LIBDIR}")
else()
  set(CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()

function(softvia_add_library_package target)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "PCNAME;VERSION_SCRIPT;DESCRIPTION"
                        "HEADERS;REQUIRES_PRIVATE;EXTRA_CFLAGS;EXTRA_LIBS")
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "softvia_add_library_package(${target}): unknown arguments ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT A_VERSION_SCRIPT OR NOT A_DESCRIPTION)
    message(FATAL_ERROR "softvia_add_library_package(${target}): VERSION_SCRIPT and DESCRIPTION are required")
  endif()
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "SHARED_LIBRARY")
    message(FATAL_ERROR "softvia_add_library_package(${target}): ${target} is a ${type}, not a shared library")
  endif()
  if(NOT A_PCNAME)
    set(A_PCNAME ${target})
  endif()
  get_filename_component(script ${A_VERSION_SCRIPT} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})

  # Any 0.x is ABI compatible with any other 0.x: the SONAME carries the major only.
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    LINK_DEPENDS ${script})
  target_link_options(${target} PRIVATE -Wl,--version-script=${script} -Wl,--no-undefined)

  install(TARGETS ${target} EXPORT softviaTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  if(A_HEADERS)
    install(FILES ${A_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()

  # <pcname>.pc. Its prefix is the one given at install time (cmake --install --prefix
  # P), not the configure-time CMAKE_INSTALL_PREFIX, so the install script writes the
  # file: the template is configured now with a placeholder the install step replaces.
  set(SOFTVIA_PC_PREFIX "@SOFTVIA_INSTALL_PREFIX@")
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(SOFTVIA_PC_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(SOFTVIA_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  set(PC_NAME ${A_PCNAME})
  set(PC_DESCRIPTION ${A_DESCRIPTION})
  get_target_property(PC_LIB ${target} OUTPUT_NAME)
  if(NOT PC_LIB)
    set(PC_LIB ${target})
  endif()
  set(PC_REQUIRES_PRIVATE "")
  if(A_REQUIRES_PRIVATE)
    string(JOIN " " reqs ${A_REQUIRES_PRIVATE})
    set(PC_REQUIRES_PRIVATE "Requires.private: ${reqs}")
  endif()
  string(JOIN " " PC_EXTRA_CFLAGS "" ${A_EXTRA_CFLAGS})
  string(JOIN " " PC_EXTRA_LIBS "" ${A_EXTRA_LIBS})
  set(stage ${PROJECT_BINARY_DIR}/pkgconfig/${A_PCNAME}.pc.stage)
  set(pc ${PROJECT_BINARY_DIR}/pkgconfig/${A_PCNAME}.pc)
  configure_file(${SOFTVIA_PACKAGING_DIR}/softvia-library.pc.in ${stage} @ONLY)
  install(CODE "
    file(READ \"${stage}\" _softvia_pc)
    string(REPLACE \"@SOFTVIA_INSTALL_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" _softvia_pc \"\${_softvia_pc}\")
    file(WRITE \"${pc}\" \"\${_softvia_pc}\")
  ")
  install(FILES ${pc} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

function(softvia_install_package)
  install(EXPORT softviaTargets
    NAMESPACE softvia::
    FILE softviaTargets.cmake
    DESTINATION ${SOFTVIA_CMAKE_DIR})
  configure_package_config_file(
    ${SOFTVIA_PACKAGING_DIR}/softviaConfig.cmake.in
    ${PROJECT_BINARY_DIR}/cmake/softviaConfig.cmake
    INSTALL_DESTINATION ${SOFTVIA_CMAKE_DIR}
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
  # Same rule as the SONAMEs: any 0.x is compatible with any other.
  write_basic_package_version_file(
    ${PROJECT_BINARY_DIR}/cmake/softviaConfigVersion.cmake
    VERSION ${PROJECT_VERSION}
    COMPATIBILITY SameMajorVersion)
  install(FILES
    ${PROJECT_BINARY_DIR}/cmake/softviaConfig.cmake
    ${PROJECT_BINARY_DIR}/cmake/softviaConfigVersion.cmake
    DESTINATION ${SOFTVIA_CMAKE_DIR})
endfunction()
