# SlimWheelStatic.cmake: link CUDA libraries statically, as small as a static link can be, and invisible from outside.
#
# Included by SlimWheel.cmake's slimwheel_link_cuda() when SLIMWHEEL_LINK=static:
#   _slimwheel_link_static(<target> <component>...)      components: cudart cublas cublasLt (culibos is added)
#
# Libraries come from SLIMWHEEL_STATIC_LIBDIR (the nvprune'd copies that `slimwheel prune` / `slimwheel build --link
# static` make: only the plan's GPUs' code), else from the toolkit's own library folder, unpruned, with a warning.
#
# What the link does, and why (measured with CUDA 11.8, lab/bench/static-experiment.py, docs/static.md):
# - Archives in dependency order, each before the archives it calls into: cuBLAS, cuBLASLt, culibos, cudart. The
#   linker then takes from each archive only the members something already needs. No --start-group: in CUDA 11.8 no
#   archive of this set calls back into an earlier one (a link with --no-undefined succeeds in this order, and nm finds
#   no symbol cuBLASLt needs from cuBLAS), and a group only makes the linker rescan.
# - --exclude-libs,ALL: every symbol that comes from an archive becomes local. A process that also loads the shared
#   cuBLAS (torch does) must not see a second cuBLAS through our symbols: two copies interposing is a crash.
#   Local symbols are also no longer roots for --gc-sections, which then drops the unreferenced code.
# - Hidden visibility for our own code (only the module's entry points are exported), --gc-sections, --as-needed.
# - CUDA_RUNTIME_LIBRARY Static: the CUDA runtime is linked in too, so the module needs only libcuda.so.1 (the driver,
#   dlopened at run time) and the C/C++ runtime: no nvidia-* wheel, no Requires-Dist, nothing for repair to exclude.
# - Archives last on the link line, even after libraries linked to the target later (deferred, see below).
# - libdl, librt, pthread: what libcudart_static.a and libculibos.a call (part of libc since glibc 2.34; --as-needed
#   drops them there).

include_guard(GLOBAL)

# Link order, file names and what each component needs: _SLIMWHEEL_STATIC_* in SlimWheelTables.cmake, generated
# from slimwheel/cuda/libs.py (STATIC_LIBS), the table slimwheel prune uses too.
include("${CMAKE_CURRENT_LIST_DIR}/SlimWheelTables.cmake")

function(_slimwheel_link_static target)
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "slimwheel: _slimwheel_link_static: '${target}' is not a target")
  endif()

  # The requested components and their dependencies, in link order.
  set(wanted "")
  set(todo ${ARGN})
  while(todo)
    list(POP_FRONT todo requested)
    set(match "")
    foreach(known IN LISTS _SLIMWHEEL_STATIC_ORDER)
      string(TOLOWER "${known}" k)
      string(TOLOWER "${requested}" r)
      if(k STREQUAL r)
        set(match "${known}")
      endif()
    endforeach()
    if(match STREQUAL "")
      string(REPLACE ";" ", " known_list "${_SLIMWHEEL_STATIC_ORDER}")
      message(FATAL_ERROR "slimwheel: no static CUDA library '${requested}' (static link mode knows: ${known_list}); "
                          "link it dynamically (SLIMWHEEL_LINK=dynamic)")
    endif()
    if(NOT match IN_LIST wanted)
      list(APPEND wanted "${match}")
      list(APPEND todo ${_SLIMWHEEL_STATIC_DEPS_${match}})
    endif()
  endwhile()

  # Where the archives are: the pruned folder, else the toolkit's (unpruned: every GPU's code, much larger).
  if(SLIMWHEEL_STATIC_LIBDIR)
    if(NOT IS_DIRECTORY "${SLIMWHEEL_STATIC_LIBDIR}")
      message(FATAL_ERROR "slimwheel: SLIMWHEEL_STATIC_LIBDIR '${SLIMWHEEL_STATIC_LIBDIR}' is not a folder; "
                          "run `slimwheel prune` (or `slimwheel build --link static`, which does it)")
    endif()
    set(search "${SLIMWHEEL_STATIC_LIBDIR}")
    set(origin "nvprune'd, ${SLIMWHEEL_STATIC_LIBDIR}")
  else()
    if(NOT TARGET CUDA::cudart_static)
      list(APPEND CMAKE_LIBRARY_PATH ${SLIMWHEEL_CUDA_LIBDIRS})
      find_package(CUDAToolkit REQUIRED)
    endif()
    set(search ${SLIMWHEEL_CUDA_LIBDIRS} ${CUDAToolkit_LIBRARY_DIR})
    set(origin "the toolkit's, NOT pruned")
    message(WARNING "slimwheel: SLIMWHEEL_LINK=static without SLIMWHEEL_STATIC_LIBDIR: linking the toolkit's static "
                    "CUDA libraries unpruned (code for every GPU they support). `slimwheel build --link static` "
                    "prunes them to the plan's targets first.")
  endif()

  set(archives "")
  set(ordered "")
  foreach(component IN LISTS _SLIMWHEEL_STATIC_ORDER)
    if(NOT component IN_LIST wanted)
      continue()
    endif()
    list(APPEND ordered "${component}")
    set(file "${_SLIMWHEEL_STATIC_FILE_${component}}")
    set(found "")
    foreach(dir IN LISTS search)
      if(EXISTS "${dir}/${file}")
        set(found "${dir}/${file}")
        break()
      endif()
    endforeach()
    if(found STREQUAL "")
      string(REPLACE ";" ", " where "${search}")
      message(FATAL_ERROR "slimwheel: static CUDA library ${file} (component ${component}) not found in ${where}; "
                          "static linking needs a toolkit with static libraries (scripts/setup-cuda11.sh installs "
                          "Debian's CUDA 11.8)")
    endif()
    list(APPEND archives "${found}")
  endforeach()

  # The CUDA runtime comes from our archive list; CMake would otherwise add the toolkit's libcudart_static.a (or, with
  # None, nothing) after it. cudadevrt is only needed with separable compilation; CMake adds it then.
  set_target_properties("${target}" PROPERTIES
    CUDA_RUNTIME_LIBRARY Static
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)

  # The archives must come after everything that calls into them, also static libraries of the project that are
  # linked to the target after this call (`target_link_libraries(ext PRIVATE my_kernels)`): the linker only takes
  # archive members for symbols it already needs, and a module may link with undefined symbols, so a wrong order
  # fails at import. So the archives are appended at the end of this directory's configuration (CMake >= 3.19),
  # in one call, which keeps their order. The arguments are quoted into the deferred call now.
  set(items "")
  foreach(item IN LISTS archives ITEMS pthread ${CMAKE_DL_LIBS} rt)
    string(APPEND items " [==[${item}]==]")
  endforeach()
  set(args "[==[${target}]==] PRIVATE${items}")
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
    cmake_language(EVAL CODE "cmake_language(DEFER CALL target_link_libraries ${args})")
  else()
    message(WARNING "slimwheel: CMake ${CMAKE_VERSION} cannot defer the static CUDA libraries to the end of the link "
                    "line; link the project's own libraries to ${target} before slimwheel_link_cuda()")
    cmake_language(EVAL CODE "target_link_libraries(${args})")
  endif()
  target_link_options("${target}" PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--gc-sections" "LINKER:--as-needed")
  if(NOT TARGET CUDA::toolkit)
    list(APPEND CMAKE_LIBRARY_PATH ${SLIMWHEEL_CUDA_LIBDIRS})
    find_package(CUDAToolkit QUIET)
  endif()
  if(TARGET CUDA::toolkit)
    # cublas_v2.h and friends for host sources (nvcc finds them by itself for .cu files).
    target_link_libraries("${target}" PRIVATE CUDA::toolkit)
  endif()

  string(REPLACE ";" " " shown "${ordered}")
  message(STATUS "slimwheel: ${target} links ${shown} statically (${origin}); archive symbols kept local")
endfunction()
