# find_package(slimwheel CONFIG) entry: scikit-build-core finds this folder through the `cmake.root` entry point
# of the installed slimwheel (and as <site-packages>/slimwheel/cmake); `slimwheel build` passes slimwheel_DIR.
# Everything lives in SlimWheel.cmake, which add_subdirectory() of the slimwheel repository includes too.
include("${CMAKE_CURRENT_LIST_DIR}/slimwheelConfigVersion.cmake")
set(slimwheel_VERSION "${PACKAGE_VERSION}")
include("${CMAKE_CURRENT_LIST_DIR}/SlimWheel.cmake")
set(slimwheel_FOUND TRUE)
