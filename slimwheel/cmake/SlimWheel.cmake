# SlimWheel.cmake: applies a slimwheel build plan to CUDA targets.
#
#   find_package(slimwheel CONFIG REQUIRED)        # or add_subdirectory(<slimwheel repo>)
#   slimwheel_cuda_target(<target>)                # every target with CUDA sources, and the extension module
#   slimwheel_link_cuda(<target> LIBRARIES cudart cublas [PACKAGE_DEPTH <n>])
#
# The plan arrives as cache variables that `slimwheel build` passes (-C cmake.define.SLIMWHEEL_...=...):
#   SLIMWHEEL_CUDA_ARCHITECTURES  CMake list of targets, e.g. "75-real;80-real;90-real;100-real;120"
#   SLIMWHEEL_COMPRESSION         auto | none | default | size | speed | balance | legacy
#   SLIMWHEEL_LINK                dynamic | static
#   SLIMWHEEL_CUDA_MAJOR          11 | 12 | 13 (must match the toolkit)
#   SLIMWHEEL_STATIC_LIBDIR       folder with nvprune'd static libraries (static mode)
#   SLIMWHEEL_CUDA_LIBDIRS        toolkit library folders, searched first
#   SLIMWHEEL_CUDA_INCLUDEDIRS    toolkit include folders (for toolkits assembled from wheels)
#   SLIMWHEEL_STRIP               strip symbols at link time in Release/MinSizeRel (default ON)
# Unset variables get defaults (a plain `pip wheel .` works); each default is announced in the configure log.
#
# Functions read their data through CMAKE_CURRENT_FUNCTION_LIST_DIR and global properties, never through
# variables of the including scope, so they also work from a parent directory after add_subdirectory().

include_guard(GLOBAL)

if(CMAKE_VERSION VERSION_LESS 3.18)
  message(FATAL_ERROR "slimwheel needs CMake >= 3.18 (for CUDA_ARCHITECTURES with -real/-virtual); this is ${CMAKE_VERSION}")
endif()
# The functions below keep these policies (recorded where they are defined), whatever the project asked for.
cmake_policy(PUSH)
cmake_policy(VERSION 3.18...3.31)

set(SLIMWHEEL_CUDA_ARCHITECTURES "" CACHE STRING
    "CUDA targets in CMake syntax (75-real;80-real;90). Empty: slimwheel's plan for the toolkit.")
set(SLIMWHEEL_COMPRESSION "" CACHE STRING
    "Fatbin compression: auto, none, default, size, speed, balance, legacy (-Xfatbin=-compress-all). Empty: auto.")
set_property(CACHE SLIMWHEEL_COMPRESSION PROPERTY STRINGS "" auto none default size speed balance legacy)
set(SLIMWHEEL_LINK "" CACHE STRING "How CUDA libraries are linked: dynamic (nvidia-* wheels) or static. Empty: dynamic.")
set_property(CACHE SLIMWHEEL_LINK PROPERTY STRINGS "" dynamic static)
set(SLIMWHEEL_CUDA_MAJOR "" CACHE STRING "CUDA major the wheel is for (11, 12, 13). Empty: the toolkit's.")
set(SLIMWHEEL_STATIC_LIBDIR "" CACHE PATH "Folder with nvprune'd static CUDA libraries (SLIMWHEEL_LINK=static).")
set(SLIMWHEEL_CUDA_LIBDIRS "" CACHE STRING "CUDA library folders, searched before the toolkit's own.")
set(SLIMWHEEL_CUDA_INCLUDEDIRS "" CACHE STRING "Extra CUDA include folders (toolkits assembled from wheels).")
option(SLIMWHEEL_STRIP "Strip symbols of linked targets in Release and MinSizeRel builds." ON)

# The settings a configure run uses, resolved once (defaults filled in, the toolkit checked) into global properties.
function(_slimwheel_resolve)
  get_property(done GLOBAL PROPERTY _SLIMWHEEL_RESOLVED)
  if(done)
    return()
  endif()
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelTables.cmake")

  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CUDA" IN_LIST languages)
    message(FATAL_ERROR "slimwheel: the CUDA language is not enabled; use project(<name> LANGUAGES CXX CUDA) "
                        "or enable_language(CUDA) before calling slimwheel functions")
  endif()
  if(NOT CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
    message(FATAL_ERROR "slimwheel: CUDA compiler ${CMAKE_CUDA_COMPILER} is ${CMAKE_CUDA_COMPILER_ID}; slimwheel needs nvcc")
  endif()
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" release "${CMAKE_CUDA_COMPILER_VERSION}")
  set(major "${CMAKE_MATCH_1}")

  # A wheel for CUDA 12 built with a CUDA 13 nvcc would point its RPATH at the wrong nvidia-* folders.
  if(SLIMWHEEL_CUDA_MAJOR AND NOT SLIMWHEEL_CUDA_MAJOR STREQUAL major)
    message(FATAL_ERROR "slimwheel: SLIMWHEEL_CUDA_MAJOR is ${SLIMWHEEL_CUDA_MAJOR} but ${CMAKE_CUDA_COMPILER} "
                        "is CUDA ${CMAKE_CUDA_COMPILER_VERSION}; point CMAKE_CUDA_COMPILER at a CUDA ${SLIMWHEEL_CUDA_MAJOR} nvcc")
  endif()

  set(archs "${SLIMWHEEL_CUDA_ARCHITECTURES}")
  set(mode "${SLIMWHEEL_COMPRESSION}")
  set(link "${SLIMWHEEL_LINK}")
  if(archs STREQUAL "" OR mode STREQUAL "" OR link STREQUAL "")
    _slimwheel_plan_defaults("${release}" plan_archs plan_mode plan_link origin)
    foreach(pair IN ITEMS "archs;plan_archs;CUDA_ARCHITECTURES" "mode;plan_mode;COMPRESSION" "link;plan_link;LINK")
      list(GET pair 0 var)
      list(GET pair 1 default)
      list(GET pair 2 name)
      if("${${var}}" STREQUAL "")
        set(${var} "${${default}}")
        message(STATUS "slimwheel: SLIMWHEEL_${name} not set; using '${${var}}' from ${origin}")
      endif()
    endforeach()
  endif()
  if(NOT link MATCHES "^(dynamic|static)$")
    message(FATAL_ERROR "slimwheel: SLIMWHEEL_LINK is '${link}'; expected dynamic or static")
  endif()
  if(archs MATCHES "(^|;)(native|all|all-major)(;|$)")
    # `native` builds for the build machine's GPU only (none on a CI runner); all/all-major ignore the plan.
    message(FATAL_ERROR "slimwheel: SLIMWHEEL_CUDA_ARCHITECTURES='${archs}': name the targets (e.g. 75-real;80-real;90) "
                        "or leave it empty for slimwheel's plan")
  endif()

  if(mode STREQUAL "auto")
    if(release VERSION_GREATER_EQUAL 12.8)
      set(mode size)
    else()
      set(mode legacy)
    endif()
  endif()
  if(NOT mode MATCHES "^(none|default|size|speed|balance|legacy)$")
    message(FATAL_ERROR "slimwheel: SLIMWHEEL_COMPRESSION is '${mode}'; expected auto, none, default, size, speed, balance or legacy")
  endif()
  if(mode STREQUAL "legacy")
    set(compress_flags "-Xfatbin=-compress-all")
  elseif(release VERSION_GREATER_EQUAL 12.8)
    set(compress_flags "--compress-mode=${mode}")
  elseif(mode STREQUAL "none")
    set(compress_flags "")  # before 12.8 nvcc has no switch for it; its default leaves most entries uncompressed
  else()
    message(WARNING "slimwheel: --compress-mode=${mode} needs CUDA >= 12.8 (this is ${release}); using -Xfatbin=-compress-all")
    set(mode legacy)
    set(compress_flags "-Xfatbin=-compress-all")
  endif()

  _slimwheel_cxx_runtime_dir(cxx_runtime_dir)

  set_property(GLOBAL PROPERTY _SLIMWHEEL_CXX_RUNTIME_DIR "${cxx_runtime_dir}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_RELEASE "${release}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_MAJOR "${major}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_ARCHS "${archs}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_COMPRESSION "${mode}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_COMPRESS_FLAGS "${compress_flags}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_LINK "${link}")
  set_property(GLOBAL PROPERTY _SLIMWHEEL_RESOLVED TRUE)
  message(STATUS "slimwheel: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${archs}, compression ${mode}, link ${link}")
endfunction()

# A GCC whose link takes libstdc++.a (its folder has the archive but no usable libstdc++.so: the development package's
# link missing, or dangling as in a GCC moved to /opt/gcc) links the archive into every module it builds, with its
# symbols exported: a second C++ runtime beside the process's shared one, which `slimwheel check` refuses (the faiss
# wheels built that way on a GPU machine crashed in std::regex code). Which file -lstdc++ resolves to is asked of the
# linker itself (--trace on a one-function link): -print-file-name may name a libstdc++.so that the linker never
# reaches, because a folder earlier on its search path holds the archive. When it is the archive, the shared library
# (libstdc++.so.6, as the compiler finds it) is offered under the name -lstdc++ looks for, in a folder of the build
# tree that slimwheel_cuda_target puts first on the link's search path, and the probe link checks that it is taken.
# Sets <out> to that folder, or to "" when the compiler links the shared library already (or no libstdc++).
function(_slimwheel_cxx_runtime_dir out)
  set(${out} "" PARENT_SCOPE)
  if(NOT CMAKE_HOST_SYSTEM_NAME STREQUAL "Linux")
    return()
  endif()
  # The driver that links: the C++ compiler, or in a CUDA-only project the host compiler nvcc links with.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CXX" IN_LIST languages)
    set(cxx "${CMAKE_CXX_COMPILER}")
  elseif(CMAKE_CUDA_HOST_COMPILER)
    set(cxx "${CMAKE_CUDA_HOST_COMPILER}")
  else()
    find_program(_SLIMWHEEL_HOST_CXX NAMES g++ c++ DOC "the host compiler nvcc links with (slimwheel's libstdc++ probe)")
    set(cxx "${_SLIMWHEEL_HOST_CXX}")
  endif()
  if(NOT cxx)
    return()
  endif()
  set(probe "${CMAKE_BINARY_DIR}/CMakeFiles/slimwheel-cxx-runtime")
  file(MAKE_DIRECTORY "${probe}")
  file(WRITE "${probe}/probe.cpp"
    "#include <string>\nstd::string slimwheel_probe(const char* s) { return std::string(s) + \"!\"; }\n")
  _slimwheel_linked_libstdcxx("${cxx}" "${probe}" "" first)
  if(NOT first MATCHES "libstdc\\+\\+\\.a$")
    return()  # the shared library, or no libstdc++ at all (libc++, a failed probe)
  endif()
  execute_process(COMMAND "${cxx}" -print-file-name=libstdc++.so.6
    RESULT_VARIABLE rc OUTPUT_VARIABLE so6 OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  # GCC prints the bare name when it finds no such file.
  if(NOT rc EQUAL 0 OR NOT IS_ABSOLUTE "${so6}" OR NOT EXISTS "${so6}")
    execute_process(COMMAND "${cxx}" -dumpversion OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REGEX MATCH "^[0-9]+" gcc_major "${version}")
    message(FATAL_ERROR "slimwheel: ${cxx} links ${first} and finds no libstdc++.so.6: every module "
      "would carry libstdc++ linked statically and export it (a second C++ runtime in the process; `slimwheel check` "
      "refuses such a file). Install the compiler's libstdc++ development package (libstdc++-${gcc_major}-dev on "
      "Debian and Ubuntu, gcc-c++ on RHEL) or repair its libstdc++.so link.")
  endif()
  set(dir "${CMAKE_BINARY_DIR}/slimwheel-cxx-runtime")
  file(MAKE_DIRECTORY "${dir}")
  file(CREATE_LINK "${so6}" "${dir}/libstdc++.so" SYMBOLIC)
  _slimwheel_linked_libstdcxx("${cxx}" "${probe}" "-L${dir}" second)
  if(NOT second STREQUAL "${dir}/libstdc++.so")
    message(FATAL_ERROR "slimwheel: ${cxx} links ${first} (a static libstdc++ that modules would export); "
      "offered ${so6} through ${dir}, the link still took '${second}'. Install the compiler's libstdc++ development "
      "package or repair its libstdc++.so link.")
  endif()
  message(WARNING "slimwheel: ${cxx} links ${first}, so its modules would carry libstdc++ statically "
    "and export it; targets of slimwheel_cuda_target link the shared ${so6} instead (through ${dir}). Repairing the "
    "compiler's libstdc++.so link (or installing its development package) makes this unnecessary.")
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# Where _slimwheel_cxx_runtime_dir found a compiler that links libstdc++.a: <target> links the shared one instead.
# User -L folders come before the compiler's own on the link line, so -lstdc++ finds it there. Both public functions
# call it, so a target that only slimwheel_link_cuda sees (a project keeping its own compile flags) gets it too.
function(_slimwheel_link_cxx_runtime target)
  get_property(dir GLOBAL PROPERTY _SLIMWHEEL_CXX_RUNTIME_DIR)
  get_target_property(type "${target}" TYPE)
  get_target_property(done "${target}" _SLIMWHEEL_CXX_RUNTIME_LINKED)
  if(dir AND type MATCHES "^(SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$" AND NOT done)
    target_link_options("${target}" PRIVATE "-L${dir}")
    set_target_properties("${target}" PROPERTIES _SLIMWHEEL_CXX_RUNTIME_LINKED TRUE)
  endif()
endfunction()

# The file -lstdc++ resolved to when <cxx> links <probe>/probe.cpp into a shared library with <extra> options (ld's
# --trace names each input it opens), or "" when the link failed or took no libstdc++.
function(_slimwheel_linked_libstdcxx cxx probe extra out)
  set(${out} "" PARENT_SCOPE)
  execute_process(COMMAND "${cxx}" -shared -fPIC ${extra} -o "${probe}/probe.so" "${probe}/probe.cpp" -Wl,--trace
    WORKING_DIRECTORY "${probe}" RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(STATUS "slimwheel: could not link a probe with ${cxx} (exit ${rc}); libstdc++ not checked")
    return()
  endif()
  # ld prints a path per line: "/x/libstdc++.so", "(/x/libstdc++.a)member.o" or "-lstdc++ (/x/libstdc++.so)" by version.
  string(REGEX MATCH "/[^\n ()]*libstdc\\+\\+\\.(so|a)" path "${text}\n${err}")
  set(${out} "${path}" PARENT_SCOPE)
endfunction()

# Defaults for unset SLIMWHEEL_* variables. If the build's Python can run slimwheel, `slimwheel plan` answers (it
# reads the project's [tool.slimwheel]); else architectures come from the committed table of plans per release (the
# closest earlier release of the same major) and the other settings from their documented defaults.
function(_slimwheel_plan_defaults release out_archs out_compression out_link out_origin)
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelTables.cmake")
  set(python "")
  foreach(candidate IN ITEMS "${Python_EXECUTABLE}" "${Python3_EXECUTABLE}")
    if(candidate)
      set(python "${candidate}")
      break()
    endif()
  endforeach()
  if(python)
    execute_process(
      COMMAND "${python}" -m slimwheel plan --format cmake --cuda "${release}" "${CMAKE_SOURCE_DIR}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(rc EQUAL 0 AND out MATCHES "set\\(SLIMWHEEL_CUDA_ARCHITECTURES \"([^\"]+)\"")
      set(${out_archs} "${CMAKE_MATCH_1}" PARENT_SCOPE)
      foreach(name IN ITEMS COMPRESSION LINK)
        string(TOLOWER "${name}" lower)
        if(out MATCHES "set\\(SLIMWHEEL_${name} \"([^\"]*)\"")
          set(${out_${lower}} "${CMAKE_MATCH_1}" PARENT_SCOPE)
        endif()
      endforeach()
      set(${out_origin} "`${python} -m slimwheel plan` for ${CMAKE_SOURCE_DIR}" PARENT_SCOPE)
      return()
    endif()
    if(NOT err MATCHES "No module named")
      # slimwheel is there but refused (a bad [tool.slimwheel], say): say why instead of silently using the table.
      message(WARNING "slimwheel: `${python} -m slimwheel plan` failed (exit ${rc}): ${err}")
    endif()
  endif()
  string(REGEX MATCH "^[0-9]+" major "${release}")
  set(best "")
  foreach(known IN LISTS _SLIMWHEEL_RELEASES)
    string(REGEX MATCH "^[0-9]+" known_major "${known}")
    if(known_major STREQUAL major AND (best STREQUAL "" OR known VERSION_LESS_EQUAL release))
      if(best STREQUAL "" OR known VERSION_GREATER best)
        set(best "${known}")
      endif()
    endif()
  endforeach()
  if(best STREQUAL "")
    message(FATAL_ERROR "slimwheel: no default architectures for CUDA ${release}; set SLIMWHEEL_CUDA_ARCHITECTURES")
  endif()
  set(${out_archs} "${_SLIMWHEEL_DEFAULT_ARCHS_${best}}" PARENT_SCOPE)
  set(${out_compression} auto PARENT_SCOPE)
  set(${out_link} dynamic PARENT_SCOPE)
  set(${out_origin} "slimwheel's default plan for CUDA ${best} (SlimWheelTables.cmake: no Python that runs slimwheel)"
      PARENT_SCOPE)
endfunction()

# slimwheel_cuda_target(<target>)
# Targets from the plan, fatbin compression, hidden symbols, unused sections and libraries dropped, symbols stripped.
function(slimwheel_cuda_target target)
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "slimwheel_cuda_target: '${target}' is not a target")
  endif()
  _slimwheel_resolve()
  get_property(archs GLOBAL PROPERTY _SLIMWHEEL_ARCHS)
  get_property(compress_flags GLOBAL PROPERTY _SLIMWHEEL_COMPRESS_FLAGS)
  get_property(link GLOBAL PROPERTY _SLIMWHEEL_LINK)
  get_target_property(type "${target}" TYPE)

  # CUDA_ARCHITECTURES wins over CMAKE_CUDA_ARCHITECTURES and the compiler's default (sm_75 on CUDA 13).
  set_target_properties("${target}" PROPERTIES
    CUDA_ARCHITECTURES "${archs}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  # cudart is linked by slimwheel_link_cuda (dynamic: the nvidia-* wheel's SONAME) or the static recipe, never by
  # CMake's default (static cudart in every target, exporting its symbols unless hidden).
  if(link STREQUAL "dynamic")
    set_target_properties("${target}" PROPERTIES CUDA_RUNTIME_LIBRARY None)
  else()
    set_target_properties("${target}" PROPERTIES CUDA_RUNTIME_LIBRARY Static)
  endif()

  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    # The visibility presets do not reach host code that nvcc hands to the host compiler in every CMake version.
    set(cuda_options -Xcompiler=-fvisibility=hidden,-ffunction-sections,-fdata-sections ${compress_flags})
    set(host_options -fvisibility=hidden -ffunction-sections -fdata-sections)
    target_compile_options("${target}" PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_options}>" "$<$<COMPILE_LANGUAGE:C,CXX>:${host_options}>")
    if(SLIMWHEEL_CUDA_INCLUDEDIRS)
      target_include_directories("${target}" SYSTEM PRIVATE ${SLIMWHEEL_CUDA_INCLUDEDIRS})
    endif()
  endif()
  if(type MATCHES "^(SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$")
    # --gc-sections keeps .nv_fatbin: the registration constructor in .init_array references it.
    target_link_options("${target}" PRIVATE "LINKER:--gc-sections" "LINKER:--as-needed")
    _slimwheel_link_cxx_runtime("${target}")
    if(SLIMWHEEL_STRIP)
      # -s drops .symtab and debug info only; .nv_fatbin and .dynsym (the module's entry point) stay.
      target_link_options("${target}" PRIVATE "$<$<OR:$<CONFIG:Release>,$<CONFIG:MinSizeRel>>:LINKER:-s>")
    endif()
    if(compress_flags)
      # With separable compilation the device-link step writes a fatbin too.
      target_link_options("${target}" PRIVATE "$<DEVICE_LINK:${compress_flags}>")
    endif()
  endif()
endfunction()

# The link item for one CUDA component in dynamic mode: the SONAME's file in SLIMWHEEL_CUDA_LIBDIRS (first),
# FindCUDAToolkit's imported target, or the SONAME's file next to the toolkit's libraries. Wheels of nvidia-* ship
# only versioned files (libcublas.so.13) and no libcublas.so, so the SONAME is searched for too.
function(_slimwheel_dynamic_lib major component out)
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelTables.cmake")
  set(soname "${_SLIMWHEEL_LIB_${major}_${component}_SONAME}")
  set(var "SLIMWHEEL_${component}_LIBRARY")
  if(SLIMWHEEL_CUDA_LIBDIRS AND NOT ${var})
    find_library(${var} NAMES "${component}" "${soname}" PATHS ${SLIMWHEEL_CUDA_LIBDIRS} NO_DEFAULT_PATH)
  endif()
  if(${var})
    set(${out} "${${var}}" PARENT_SCOPE)
    return()
  endif()
  # FindCUDAToolkit's target, when it is this major's library: with a system CUDA of another major beside the
  # compiler's toolkit (Debian's CUDA 11.8 in /usr/lib), FindCUDAToolkit may pick the system's libcudart.so.11.0 for a
  # CUDA 13 build, and the extension would need a library of the wrong major.
  if(TARGET "CUDA::${component}")
    get_target_property(_slw_loc "CUDA::${component}" IMPORTED_LOCATION)
    if(_slw_loc)
      file(REAL_PATH "${_slw_loc}" _slw_real)
      get_filename_component(_slw_name "${_slw_real}" NAME)
      string(FIND "${_slw_name}" "${soname}" _slw_at)
    endif()
    if(NOT _slw_loc OR _slw_at EQUAL 0)
      set(${out} "CUDA::${component}" PARENT_SCOPE)
      return()
    endif()
    message(STATUS "slimwheel: CUDA::${component} is ${_slw_real}, not ${soname}: searching the compiler's toolkit")
  endif()
  # The compiler's own toolkit first (its lib64 beside bin/nvcc), then FindCUDAToolkit's folders.
  get_filename_component(_slw_nvcc_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  get_filename_component(_slw_nvcc_root "${_slw_nvcc_root}" DIRECTORY)
  find_library(${var} NAMES "${soname}" "${component}"
               HINTS "${_slw_nvcc_root}" ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH)
  if(NOT ${var})
    message(FATAL_ERROR "slimwheel: cannot find ${soname} (CUDA component ${component}) in SLIMWHEEL_CUDA_LIBDIRS "
                        "(${SLIMWHEEL_CUDA_LIBDIRS}) or the toolkit (${CUDAToolkit_LIBRARY_DIR}); install "
                        "${_SLIMWHEEL_LIB_${major}_${component}_PACKAGE} or point SLIMWHEEL_CUDA_LIBDIRS at its lib folder")
  endif()
  set(${out} "${${var}}" PARENT_SCOPE)
endfunction()

# slimwheel_link_cuda(<target> LIBRARIES <component>... [PACKAGE_DEPTH <n>])
# Components are the names of slimwheel's library table (cudart, cublas, cublasLt, curand, cusparse, ...).
# PACKAGE_DEPTH: how many folders the target sits below site-packages (site-packages/knn/_knn.so: 1).
function(slimwheel_link_cuda target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PACKAGE_DEPTH" "LIBRARIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "slimwheel_link_cuda: unexpected arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "slimwheel_link_cuda: '${target}' is not a target")
  endif()
  if(NOT DEFINED arg_PACKAGE_DEPTH)
    set(arg_PACKAGE_DEPTH 1)
  elseif(NOT arg_PACKAGE_DEPTH MATCHES "^[0-9]+$")
    message(FATAL_ERROR "slimwheel_link_cuda: PACKAGE_DEPTH must be a whole number, got '${arg_PACKAGE_DEPTH}'")
  endif()
  _slimwheel_resolve()
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelTables.cmake")
  get_property(major GLOBAL PROPERTY _SLIMWHEEL_MAJOR)
  get_property(link GLOBAL PROPERTY _SLIMWHEEL_LINK)
  _slimwheel_link_cxx_runtime("${target}")

  # Canonical component names, cudart always: the kernels' launch code needs it.
  set(components cudart)
  foreach(requested IN LISTS arg_LIBRARIES)
    string(TOLOWER "${requested}" wanted)
    set(match "")
    foreach(known IN LISTS _SLIMWHEEL_LIBS_${major})
      string(TOLOWER "${known}" k)
      if(k STREQUAL wanted)
        set(match "${known}")
      endif()
    endforeach()
    if(match STREQUAL "")
      string(REPLACE ";" ", " known_list "${_SLIMWHEEL_LIBS_${major}}")
      message(FATAL_ERROR "slimwheel_link_cuda: no CUDA ${major} library '${requested}'; known: ${known_list}")
    endif()
    list(APPEND components "${match}")
  endforeach()
  list(REMOVE_DUPLICATES components)

  if(SLIMWHEEL_CUDA_INCLUDEDIRS)
    target_include_directories("${target}" SYSTEM PRIVATE ${SLIMWHEEL_CUDA_INCLUDEDIRS})
  endif()

  if(link STREQUAL "static")
    if(NOT EXISTS "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelStatic.cmake")
      message(FATAL_ERROR "slimwheel: SLIMWHEEL_LINK=static needs ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelStatic.cmake, "
                          "which this slimwheel does not have; use SLIMWHEEL_LINK=dynamic")
    endif()
    include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/SlimWheelStatic.cmake")
    _slimwheel_link_static("${target}" ${components})
    return()
  endif()

  # The shared cudart below replaces CMake's default static one, also when slimwheel_cuda_target was not called here.
  set_target_properties("${target}" PROPERTIES CUDA_RUNTIME_LIBRARY None)
  if(NOT TARGET CUDA::cudart)
    list(APPEND CMAKE_LIBRARY_PATH ${SLIMWHEEL_CUDA_LIBDIRS})
    find_package(CUDAToolkit REQUIRED)
  endif()
  set(items "")
  set(folders "")
  set(todo ${components})
  while(todo)
    list(POP_FRONT todo component)
    _slimwheel_dynamic_lib("${major}" "${component}" item)
    list(APPEND items "${item}")
    # RUNPATH is not searched for the dependencies of dependencies, so their folders are listed too (CUDA 12).
    list(APPEND folders "${_SLIMWHEEL_LIB_${major}_${component}_FOLDER}")
    foreach(dep IN LISTS _SLIMWHEEL_LIB_${major}_${component}_AFTER)
      list(APPEND folders "${_SLIMWHEEL_LIB_${major}_${dep}_FOLDER}")
    endforeach()
  endwhile()
  # The requested libraries stay DT_NEEDED whatever the link order: --as-needed (set by slimwheel_cuda_target) would
  # drop a library that comes before the static archive that uses it, leaving an extension that fails at import.
  foreach(item IN LISTS items)
    if(TARGET "${item}")
      set(item "$<TARGET_FILE:${item}>")
    endif()
    target_link_libraries("${target}" PRIVATE "-Wl,--push-state,--no-as-needed,${item},--pop-state")
  endforeach()
  if(TARGET CUDA::toolkit)
    # Headers of the toolkit (cuda_runtime.h, cublas_v2.h) for host sources of this target.
    target_link_libraries("${target}" PRIVATE CUDA::toolkit)
  endif()

  list(REMOVE_DUPLICATES folders)
  string(REPEAT "/.." "${arg_PACKAGE_DEPTH}" up)
  set(rpath "")
  foreach(folder IN LISTS folders)
    list(APPEND rpath "$ORIGIN${up}/${folder}")
  endforeach()
  get_target_property(existing "${target}" INSTALL_RPATH)
  if(existing)
    list(PREPEND rpath ${existing})
    list(REMOVE_DUPLICATES rpath)
  endif()
  set_target_properties("${target}" PROPERTIES INSTALL_RPATH "${rpath}")
  message(STATUS "slimwheel: ${target} links ${components} dynamically; INSTALL_RPATH ${rpath}")
endfunction()

cmake_policy(POP)

# slimwheel_nvrtc_embed(): kernel sources embedded for runtime compilation (docs/nvrtc.md).
include("${CMAKE_CURRENT_LIST_DIR}/SlimWheelNvrtc.cmake")
